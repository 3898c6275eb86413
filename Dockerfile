# The image a TFJob's replicas (or any container runtime) run flowc tasks in:
#   docker build -t flowc:latest .
#   flowc cluster manifest --format tfjob --jobs ps=1,worker=2 --image flowc:latest
# Each task compiles the partitions its master registers, so the image has a C compiler.
# For GPU tasks, build FROM an nvidia/cuda *-devel image instead and install '.[gpu]'.
#
# Checked without a container runtime (none on the machine it was written on): every RUN line
# run in a fresh venv (python3 -m venv /tmp/dockervenv; apt-get's packages were already there;
# the pip install from a folder holding only what the COPY lines copy: it installs flowc and
# its dependencies, with the C runtime's headers and templates as package data), then the CMD,
# run by that venv's flowc as an unprivileged user in an empty home with TF_CONFIG and
# FLOWC_TOKEN set as the operator and the Secret set them: the task served on 0.0.0.0:2222 and
# ran a training step it compiled itself (tests/compiler/test_package_data.py keeps the
# package data complete).
FROM python:3.11-slim

RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/flowc
COPY setup.cfg pyproject.toml README.md ./
COPY compiler ./compiler
COPY runtime ./runtime
COPY dsl ./dsl
COPY codegen_templates ./codegen_templates
RUN python3 -m pip install --no-cache-dir . \
 && useradd --create-home --uid 1000 flowc

# Compiled partitions are cached here (FLOWC_CACHE_DIR); the tasks run unprivileged.
ENV FLOWC_CACHE_DIR=/home/flowc/.cache/flowc
USER flowc
WORKDIR /home/flowc

# The TFJob operator's default port ("tfjob-port"). TF_CONFIG (set by the operator) gives the
# task its cluster, job and index; the token comes from the environment (FLOWC_TOKEN).
EXPOSE 2222
CMD ["flowc", "serve", "--bind", "0.0.0.0"]
