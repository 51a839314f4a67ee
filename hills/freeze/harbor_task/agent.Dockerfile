# The agent's container: the hill's public files and the submission
# folder to improve. Nothing of the hill's private/ is in this folder.
FROM {base_image}
WORKDIR /app
COPY hill/ /app/hill/
COPY submission/ /app/submission/
WORKDIR /app/submission
