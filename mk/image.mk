# image.mk - the podres container image (deploy/Dockerfile), built by buildah
# into build/image/podres-$(VERSION).tar (tools/image.sh; README, Install).
# No registry is needed: the Debian bases are made with mmdebstrap when none
# can be pulled.

IMAGE_PKGS := buildah mmdebstrap
IMAGE_TAR := build/image/podres-$(VERSION).tar

.PHONY: image image-deps
image-deps:
	@tools/deps.sh -t image-deps $(IMAGE_PKGS)

image: image-deps
	@tools/image.sh $(VERSION) build/image
