# The agent's container: the hill's public files, read-only, and the
# submission folder to improve, the agent's own. Nothing of the hill's
# private/ is in this folder.
FROM {base_image}
RUN useradd --create-home --uid 1000 {agent_user}
WORKDIR /app
COPY hill/ /app/hill/
COPY --chown={agent_user}:{agent_user} submission/ /app/submission/
USER {agent_user}
WORKDIR /app/submission
