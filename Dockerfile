# SUP's image: `docker build -t REGISTRY/sup:0.1.0 .`, or scripts/build-images (buildah, from a Debian
# base it makes: PYTHON_IMAGE is then Debian's python3, images/python/), which builds
# localhost/sup:0.1.0, the Helm chart's default image (image.repository:appVersion).
# Stage 1 builds SUP's wheel and installs it, with the exact dependency versions CI tests
# (constraints.txt), into a virtualenv; stage 2 is the same slim Python with only that virtualenv,
# run as an unprivileged user (uid 10001, the chart's runAsUser), with no build tools or caches.
#
# Slurm: stage 2 also carries the Slurm client (sacctmgr, for the Slurm target) and munge (munged
# runs in the chart's `munge` sidecar from this same image, /usr/local/sbin/sup-munged), Debian 12's
# by default: Slurm 22.05. sacctmgr talks to the site's slurmdbd, and Slurm's RPC is compatible only
# within two major releases of the daemon (a 22.05 client works with slurmdbd 22.05 to 23.11, not
# with 24.05), so a site builds the image with ITS Slurm (docs/slurm.md, "Matching your Slurm"):
#   --build-arg SLURM_PACKAGES="slurm-client=VERSION munge"   other package versions from the base's
#                                                              apt sources (e.g. a site repository)
#   --build-arg SLURM_PACKAGES= --build-arg PYTHON_IMAGE=IMAGE an image of the site's that already
#                                                              has sacctmgr and munged (only xfsprogs added)
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
# pip's index and CA bundle for the build only, when the builder has its own (a mirror, a proxy
# that re-signs TLS): scripts/build-images passes the host's; unset, pip uses its defaults.
ARG PIP_INDEX_URL
ARG PIP_CERT
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY sup ./sup
COPY migrations ./migrations
# The virtualenv first, and its pip builds the wheel: Debian's python3 (the base scripts/build-images
# makes) has no pip outside a virtualenv; the official image's would do, but this works with both.
RUN python3 -m venv /opt/sup \
 && /opt/sup/bin/pip wheel --no-deps --wheel-dir /wheels . \
 && /opt/sup/bin/pip install --constraint constraints.txt /wheels/sup-*.whl \
 && /opt/sup/bin/sup --help >/dev/null \
 && /opt/sup/bin/python -m pip uninstall --quiet --yes pip setuptools

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="sup" \
      org.opencontainers.image.description="User provisioning for Slurm-on-Kubernetes clusters" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0"
ARG SLURM_PACKAGES="slurm-client munge"
# xfsprogs: xfs_quota, for `sup homes serve` with home_dirs.quota xfs (docs/homes.md).
# policy-rc.d: no package may start a daemon while building. Then no munge key from munge's postinst
# (the key is a Secret mounted into the sidecar only), no apt lists, docs or logs, no setuid or setgid
# programs (the chart runs every container with allowPrivilegeEscalation false). /etc/slurm is the
# ConfigMap's mount point (slurm.conf), /run/munge munged's socket directory (an emptyDir).
RUN printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d \
 && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends xfsprogs $SLURM_PACKAGES \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/debconf/*-old /var/log/apt \
        /var/log/dpkg.log /var/log/alternatives.log /usr/share/doc/* /usr/share/man/* \
        /usr/sbin/policy-rc.d \
 && rm -f /etc/munge/munge.key /var/lib/munge/* \
 && find / -xdev -type f -perm /6000 -exec chmod ug-s {} + \
 && mkdir -p /etc/slurm /run/munge
COPY images/login/sup-munged /usr/local/sbin/sup-munged
RUN groupadd --system --gid 10001 sup \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/sup --create-home --shell /usr/sbin/nologin sup
COPY --from=build /opt/sup /opt/sup
ENV PATH=/opt/sup/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /var/lib/sup
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["sup"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080"]
