# The verifier's container: hills itself (the wheel of the hills that
# exported the task), the hill as a bundle holding its held-out data, and
# the script Harbor runs. Harbor builds it from this folder, apart from
# the agent's container.
FROM {base_image}
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap git \
 && rm -rf /var/lib/apt/lists/*
COPY {wheel} /tmp/{wheel}
RUN pip install --no-cache-dir /tmp/{wheel} && rm /tmp/{wheel}
COPY test.sh hills_reward.py task.json {bundle} /tests/
RUN chmod 0700 /tests && chmod 0600 /tests/{bundle}
