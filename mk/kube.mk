# kube.mk - the real Kubernetes control plane that tests and the demo run
# against (CONTRACT §6): etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and kubectl of one pinned release, built from the Go module
# proxy into build/kube/ with tests/kube/go.mod; the node side of the same
# release for tests/kube/node: kubelet, kube-proxy, the sample device plugin
# (test/images/sample-device-plugin) and the DRA test driver
# (test/e2e/dra/test-driver, renamed dra-test-driver); and the Go test
# fixtures (fault-proxy, and pause, the node's sandbox process, static).
# Test fixtures only: nothing here is part of the product.
#
# The first build takes about KUBE_BUILD_MINUTES on 2 cores; Go's module and
# build caches (~/go/pkg/mod, ~/.cache/go-build) keep it, so a second
# `make kube` does nothing and a clean clone rebuilds in a minute or two.

KUBE_DIR := build/kube
KUBE_VERSION := $(shell awk '$$1 == "k8s.io/kubernetes" && $$2 ~ /^v/ {print $$2; exit} $$1 == "require" && $$2 == "k8s.io/kubernetes" {print $$3; exit}' tests/kube/go.mod)
KUBE_MINOR := $(word 2,$(subst ., ,$(KUBE_VERSION)))
KUBE_BINS := etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy \
	sample-device-plugin dra-test-driver fault-proxy pause
GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
KUBE_SRCS := tests/kube/go.mod tests/kube/go.sum $(wildcard tests/kube/*/*.go)
# The version the binaries report (kubectl version, /version), as upstream's
# release build stamps it.
KUBE_LDFLAGS := -s -w $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(p).gitVersion=$(KUBE_VERSION) -X $(p).gitMajor=1 -X $(p).gitMinor=$(KUBE_MINOR) \
	-X $(p).gitTreeState=clean)

.PHONY: kube
kube: $(KUBE_DIR)/.built

$(KUBE_DIR)/.built: $(KUBE_SRCS) mk/kube.mk
	@test -x "$(GO)" || { echo "kube: Go is needed to build the test control plane (/usr/local/go)" >&2; exit 1; }
	@mkdir -p $(KUBE_DIR)
	@echo "kube: building Kubernetes $(KUBE_VERSION) (etcd, kube-apiserver, kube-controller-manager,"
	@echo "kube: kube-scheduler, kubectl, kubelet, kube-proxy, the sample device plugin and the DRA"
	@echo "kube: test driver) and fault-proxy into $(KUBE_DIR)/; the first build takes"
	@echo "kube: several minutes and is cached (~/.cache/go-build)"
	@cd tests/kube && $(GO) mod download && \
		{ $(GO) build -v -buildvcs=false -ldflags '$(KUBE_LDFLAGS)' -o $(CURDIR)/$(KUBE_DIR)/ tool ./etcd ./fault-proxy; \
		  echo $$? > $(CURDIR)/$(KUBE_DIR)/.rc; } 2>&1 | \
		awk '!/^[A-Za-z0-9._~\/-]+$$/ { print; next } \
		     { n++; if (n % 200 == 0) { printf "kube: %d packages compiled\n", n; fflush() } }'; \
		exit $$(cat $(CURDIR)/$(KUBE_DIR)/.rc)
	@mv -f $(KUBE_DIR)/test-driver $(KUBE_DIR)/dra-test-driver
	@cd tests/kube && CGO_ENABLED=0 $(GO) build -buildvcs=false -ldflags '-s -w' -o $(CURDIR)/$(KUBE_DIR)/pause ./pause
	@for b in $(KUBE_BINS); do test -x $(KUBE_DIR)/$$b || { echo "kube: $$b was not built" >&2; exit 1; }; done
	@touch $@
	@echo "kube: done: $$($(KUBE_DIR)/kube-apiserver --version), $$($(KUBE_DIR)/etcd --version | head -1)"

# What tests/kube/node runs besides build/kube/: Debian's container runtime
# and CNI plugins, the tools of its network set-up and clean-up, busybox for
# the test pods' image, and buildah for the node's images (image-deps).
NODE_PKGS := containerd runc containernetworking-plugins iptables conntrack socat busybox-static

.PHONY: node-deps
node-deps: image-deps
	@tools/deps.sh -t node-deps $(NODE_PKGS)
