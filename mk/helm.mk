# helm.mk - a real helm (the release pinned in tests/helm/go.mod) built from the Go module proxy
# into build/helm/, to lint and render deploy/helm/podres (tests/integration/79-helm.sh). Test
# fixture only: nothing here is part of the product. Go's module and build caches keep it, as
# for `make kube`; `make test` and `make integration` build it.

HELM_DIR := build/helm
HELM_VERSION := $(shell awk '$$1 == "helm.sh/helm/v4" && $$2 ~ /^v/ {print $$2; exit}' tests/helm/go.mod)

.PHONY: helm
helm: $(HELM_DIR)/helm

$(HELM_DIR)/helm: tests/helm/go.mod tests/helm/go.sum mk/helm.mk
	@test -x "$(GO)" || { echo "helm: Go is needed to build the test helm (/usr/local/go)" >&2; exit 1; }
	@mkdir -p $(HELM_DIR)
	@echo "helm: building helm $(HELM_VERSION) into $(HELM_DIR)/ (the first build takes minutes; cached)"
	@cd tests/helm && $(GO) mod download && $(GO) build -buildvcs=false \
		-ldflags '-s -w -X helm.sh/helm/v4/internal/version.version=$(HELM_VERSION)' \
		-o $(CURDIR)/$(HELM_DIR)/ tool
	@touch $@
	@echo "helm: done: $$($@ version --short)"
