# The controller's image: the static flotilla binary on an empty base, so it
# builds with a plain `docker build` and nothing to pull. The build context is
# the directory scripts/release.sh (or scripts/build-flotilla-image.sh)
# prepares, not the repository:
#
#   flotilla-<version>-linux-<arch>  the static binary (CGO_ENABLED=0)
#   ca-certificates.crt              the CA bundle, for https git remotes and chart repositories
#   rootfs/data/, rootfs/tmp/        an empty /data and /tmp (mode 1777)
#
#   docker build -f Dockerfile --build-arg VERSION=1.2.0 --build-arg TARGETARCH=amd64 \
#     -t flotilla:1.2.0 dist/
#
# The classic builder does not set TARGETARCH itself; the scripts pass it.
FROM scratch
ARG TARGETARCH=amd64
ARG VERSION=dev
# rootfs/ carries /data and /tmp with their modes: COPY keeps a directory's
# mode, and a scratch image has no shell to chmod with.
COPY rootfs/ /
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY flotilla-${VERSION}-linux-${TARGETARCH} /flotilla
ENV FLOTILLA_DATA=/data
LABEL org.opencontainers.image.title=flotilla \
      org.opencontainers.image.version=${VERSION} \
      io.flotilla.image-tag=${VERSION}
ENTRYPOINT ["/flotilla"]
CMD ["controller", "--help"]
