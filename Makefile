# podres - one non-recursive Makefile. `make` builds bin/podresd,
# bin/podres-syncer, bin/podres-extender and bin/kubectl-podres; `make test` installs what it needs and runs every test.
# `make SANITIZE=address,undefined test` builds into build/san/ and runs the
# same suite on the sanitized binaries.

# The release number. --version prints `git describe --tags --dirty --always` when this tree is
# the top of a git checkout, else VERSION (a tarball without .git).
VERSION := 0.1.0
GIT_VERSION := $(shell p=$$(git rev-parse --show-prefix 2>/dev/null) && [ -z "$$p" ] && \
	git describe --tags --dirty --always 2>/dev/null)
BUILD_VERSION := $(or $(GIT_VERSION),$(VERSION))
CC ?= cc
PKGS := libmicrohttpd sqlite3 jansson yaml-0.1 libcurl libprotobuf-c gnutls
# What each daemon links: podresd loads libcurl at run time (server/curlfn.h),
# the syncer needs neither SQLite nor protobuf-c. The syncer links Debian's
# GnuTLS build of libcurl (libcurl3-gnutls; same API and headers): GnuTLS is
# loaded and started by libcurl's LDAP and RTMP dependencies anyway, so TLS
# through it adds less than OpenSSL's (docs/SYNCER.md, "TLS toward the API server").
PODRESD_PKGS := libmicrohttpd sqlite3 jansson yaml-0.1 libprotobuf-c
SYNCER_PKGS := libmicrohttpd jansson yaml-0.1
SYNCER_CURL := -l:libcurl-gnutls.so.4

ifeq ($(SANITIZE),)
  B := build/default
  BIN := bin
  OPT := -O2 -g
else
  B := build/san
  BIN := build/san/bin
  OPT := -O1 -g -fsanitize=$(SANITIZE) -fno-sanitize-recover=all -fno-omit-frame-pointer
endif

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wold-style-definition -Wvla -Wwrite-strings -Wformat=2 -fno-common -Werror
CFLAGS_ALL = -std=c11 $(OPT) $(WARN) -MMD -MP -DPODRES_VERSION='"$(BUILD_VERSION)"' -I$(B)/gen \
             $(shell pkg-config --cflags $(PKGS) 2>/dev/null) $(CFLAGS)
LDLIBS_ALL = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread $(LDLIBS)
LDLIBS_PODRESD = $(shell pkg-config --libs $(PODRESD_PKGS) 2>/dev/null) -ldl -lpthread $(LDLIBS)
LDLIBS_SYNCER = $(shell pkg-config --libs $(SYNCER_PKGS) 2>/dev/null) $(SYNCER_CURL) -lpthread \
                $(LDLIBS)
# The extender checks its callers' client certificates with GnuTLS, which
# libmicrohttpd already links for its TLS.
LDLIBS_EXTENDER = $(LDLIBS_SYNCER) $(shell pkg-config --libs gnutls 2>/dev/null)
LDFLAGS_ALL = $(OPT) $(LDFLAGS)

ifeq ($(V),1)
  Q :=
else
  Q := @
endif

# Modules are found by name: every .c of common/ and kube/, every .c of
# server/, syncer/, extender/ and plugin/ but main.c (archived into
# lib<dir>.a for the unit tests), and the C that protoc-c generates from
# proto/*.proto.
COMMON_SRCS := $(sort $(wildcard common/*.c))
KUBE_SRCS := $(sort $(wildcard kube/*.c))
SERVER_SRCS := $(filter-out server/main.c,$(sort $(wildcard server/*.c)))
SYNCER_SRCS := $(filter-out syncer/main.c,$(sort $(wildcard syncer/*.c)))
EXTENDER_SRCS := $(filter-out extender/main.c,$(sort $(wildcard extender/*.c)))
PROTOS := $(sort $(wildcard proto/*.proto))
SCHEMA := $(sort $(wildcard schema/[0-9]*.sql))

PROTO_C := $(PROTOS:proto/%.proto=$(B)/gen/%.pb-c.c)
PROTO_OBJS := $(PROTO_C:.c=.o)
COMMON_OBJS := $(COMMON_SRCS:%.c=$(B)/%.o)
KUBE_OBJS := $(KUBE_SRCS:%.c=$(B)/%.o)
SERVER_OBJS := $(SERVER_SRCS:%.c=$(B)/%.o) $(B)/server/migrations_gen.o $(B)/server/ui_gen.o \
               $(PROTO_OBJS)
SYNCER_OBJS := $(SYNCER_SRCS:%.c=$(B)/%.o)
EXTENDER_OBJS := $(EXTENDER_SRCS:%.c=$(B)/%.o)
UNIT_SRCS := $(sort $(wildcard tests/unit/*/*_test.c))
UNIT_BINS := $(UNIT_SRCS:%.c=$(B)/%)
PROGS := $(BIN)/podresd $(if $(wildcard syncer/main.c),$(BIN)/podres-syncer) \
         $(if $(wildcard extender/main.c),$(BIN)/podres-extender) \
         $(if $(wildcard plugin/main.c),$(BIN)/kubectl-podres)

DEBIAN_PKGS := gcc make pkg-config libmicrohttpd-dev libgnutls28-dev libjansson-dev libcurl4-openssl-dev \
	libcurl3-gnutls libyaml-dev libsqlite3-dev sqlite3 curl jq python3 \
	python3-yaml openssl protobuf-c-compiler libprotobuf-c-dev python3-grpcio python3-grpc-tools perl \
	cppcheck pmccabe clang-format man-db groff-base chromium python3-websocket

.PHONY: all test check unit integration deps run demo clean format format-check lint complexity \
	install uninstall version FORCE
all: $(PROGS)

# The objects that spell PODRES_VERSION are built again when the version
# changes (a commit, a tag, an edit: -dirty); $(B)/version is rewritten only then.
VERSION_OBJS := $(patsubst %.c,$(B)/%.o,$(shell grep -l PODRES_VERSION common/*.c server/*.c \
	$(wildcard kube/*.c) $(wildcard syncer/*.c) $(wildcard extender/*.c) $(wildcard plugin/*.c) 2>/dev/null))
$(VERSION_OBJS): $(B)/version
$(B)/version: FORCE
	@mkdir -p $(dir $@)
	@echo '$(BUILD_VERSION)' | cmp -s - $@ || echo '$(BUILD_VERSION)' > $@

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	@test "$(V)" = 1 || echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS_ALL) -c -o $@ $<

$(B)/server/migrations_gen.c: $(SCHEMA) tools/embed-sql.sh
	@mkdir -p $(dir $@)
	$(Q)sh tools/embed-sql.sh $@ $(SCHEMA)

$(B)/server/migrations_gen.o: $(B)/server/migrations_gen.c
	$(Q)$(CC) $(CFLAGS_ALL) -Wno-missing-prototypes -c -o $@ $<

# The device timeline page (GET /ui), and the CSP hashes of its inline style and script.
$(B)/server/ui_gen.c: server/ui/index.html tools/embed-ui.sh
	@mkdir -p $(dir $@)
	$(Q)sh tools/embed-ui.sh $@ server/ui/index.html

$(B)/server/ui_gen.o: $(B)/server/ui_gen.c
	$(Q)$(CC) $(CFLAGS_ALL) -Wno-missing-prototypes -c -o $@ $<

# Generated protobuf-c code: headers exist before any object is compiled.
$(B)/gen/%.pb-c.c $(B)/gen/%.pb-c.h: proto/%.proto
	@mkdir -p $(dir $@)
	$(Q)protoc-c --proto_path=proto --c_out=$(B)/gen $<
$(B)/gen/%.pb-c.o: $(B)/gen/%.pb-c.c
	$(Q)$(CC) $(CFLAGS_ALL) -Wno-missing-prototypes -Wno-shadow -c -o $@ $<
$(SERVER_OBJS) $(SYNCER_OBJS) $(EXTENDER_OBJS): | $(PROTO_C)

$(B)/libcommon.a: $(COMMON_OBJS)
	$(Q)rm -f $@ && ar rcs $@ $^
$(B)/libserver.a: $(SERVER_OBJS)
	$(Q)rm -f $@ && ar rcs $@ $^

# The Kubernetes client library (kube/): the REST client, kubeconfig, exec
# credentials, informers and their caches; linked by the syncer, the
# extender and kubectl-podres.
$(B)/libkube.a: $(KUBE_OBJS)
	$(Q)rm -f $@ && ar rcs $@ $^

$(B)/libsyncer.a: $(SYNCER_OBJS)
	$(Q)rm -f $@ && ar rcs $@ $^

$(B)/libextender.a: $(EXTENDER_OBJS)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BIN)/podresd: $(B)/server/main.o $(B)/libserver.a $(B)/libcommon.a
	@mkdir -p $(dir $@)
	@test "$(V)" = 1 || echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LDLIBS_PODRESD)

$(BIN)/podres-syncer: $(B)/syncer/main.o $(B)/libsyncer.a $(B)/libkube.a $(B)/libcommon.a
	@mkdir -p $(dir $@)
	@test "$(V)" = 1 || echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LDLIBS_SYNCER)

# The extender links the Kubernetes client library (libkube.a), and the
# same libraries as the syncer.
$(BIN)/podres-extender: $(B)/extender/main.o $(B)/libextender.a $(B)/libkube.a $(B)/libcommon.a
	@mkdir -p $(dir $@)
	@test "$(V)" = 1 || echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LDLIBS_EXTENDER)

# kubectl-podres, the kubectl plugin (plugin/, docs/KUBECTL-PODRES.md): the
# REST client, kubeconfig loader and exec credentials from libkube.a, and
# the same libraries.
PLUGIN_SRCS := $(filter-out plugin/main.c,$(sort $(wildcard plugin/*.c)))
PLUGIN_OBJS := $(PLUGIN_SRCS:%.c=$(B)/%.o)
$(B)/libplugin.a: $(PLUGIN_OBJS)
	$(Q)rm -f $@ && ar rcs $@ $^
$(BIN)/kubectl-podres: $(B)/plugin/main.o $(B)/libplugin.a $(B)/libkube.a $(B)/libcommon.a
	@mkdir -p $(dir $@)
	@test "$(V)" = 1 || echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LDLIBS_SYNCER)
$(B)/tests/unit/plugin/%_test: tests/unit/plugin/%_test.c tests/unit/test.h $(B)/libplugin.a \
		$(B)/libkube.a $(B)/libcommon.a
	@mkdir -p $(dir $@)
	@test "$(V)" = 1 || echo "  TEST-CC $<"
	$(Q)$(CC) $(CFLAGS_ALL) -Wno-missing-prototypes -o $@ $< $(B)/libplugin.a $(B)/libkube.a \
		$(B)/libcommon.a $(LDLIBS_SYNCER)

$(B)/tests/unit/common/%_test: tests/unit/common/%_test.c tests/unit/test.h $(B)/libcommon.a
	@mkdir -p $(dir $@)
	@test "$(V)" = 1 || echo "  TEST-CC $<"
	$(Q)$(CC) $(CFLAGS_ALL) -Wno-missing-prototypes -o $@ $< $(B)/libcommon.a $(LDLIBS_ALL)
$(B)/tests/unit/server/%_test: tests/unit/server/%_test.c tests/unit/test.h $(B)/libserver.a \
		$(B)/libcommon.a
	@mkdir -p $(dir $@)
	@test "$(V)" = 1 || echo "  TEST-CC $<"
	$(Q)$(CC) $(CFLAGS_ALL) -Wno-missing-prototypes -o $@ $< $(B)/libserver.a $(B)/libcommon.a \
		$(LDLIBS_PODRESD)
$(B)/tests/unit/kube/%_test: tests/unit/kube/%_test.c tests/unit/test.h $(B)/libkube.a \
		$(B)/libcommon.a
	@mkdir -p $(dir $@)
	@test "$(V)" = 1 || echo "  TEST-CC $<"
	$(Q)$(CC) $(CFLAGS_ALL) -Wno-missing-prototypes -o $@ $< $(B)/libkube.a $(B)/libcommon.a \
		$(LDLIBS_SYNCER)
$(B)/tests/unit/syncer/%_test: tests/unit/syncer/%_test.c tests/unit/test.h $(B)/libsyncer.a \
		$(B)/libkube.a $(B)/libcommon.a
	@mkdir -p $(dir $@)
	@test "$(V)" = 1 || echo "  TEST-CC $<"
	$(Q)$(CC) $(CFLAGS_ALL) -Wno-missing-prototypes -o $@ $< $(B)/libsyncer.a $(B)/libkube.a \
		$(B)/libcommon.a $(LDLIBS_SYNCER)

$(B)/tests/unit/extender/%_test: tests/unit/extender/%_test.c tests/unit/test.h \
		$(B)/libextender.a $(B)/libkube.a $(B)/libcommon.a
	@mkdir -p $(dir $@)
	@test "$(V)" = 1 || echo "  TEST-CC $<"
	$(Q)$(CC) $(CFLAGS_ALL) -Wno-missing-prototypes -o $@ $< $(B)/libextender.a \
		$(B)/libkube.a $(B)/libcommon.a $(LDLIBS_EXTENDER)

deps:
	@tools/deps.sh -t deps $(DEBIAN_PKGS)

check unit: deps all $(UNIT_BINS)
	@prove --exec '' $(UNIT_BINS)

integration: deps all kube helm node-deps image
	@PODRES_BIN=$(CURDIR)/$(BIN) tests/run-integration.sh

test: deps all kube helm node-deps image $(UNIT_BINS)
	@PODRES_BIN=$(CURDIR)/$(BIN) UNIT_BINS="$(UNIT_BINS)" tests/run-all.sh

run: deps all
	@mkdir -p var
	@echo "podresd on deploy/dev/podresd.yaml; try:"
	@echo "  curl -s --unix-socket var/podresd.sock http://localhost/v1/devices | jq"
	@echo "  curl -s http://127.0.0.1:9444/v1/devices | jq"
	$(BIN)/podresd --config deploy/dev/podresd.yaml

# make demo: as root on a real node (tools/demo-node.sh: kubelet, containerd, the sample device
# plugin, podres from deploy/ with its image); otherwise, or with PODRES_DEMO=api, podresd
# beside a control plane (tools/demo.sh).
PODRES_DEMO ?= $(if $(filter 0,$(shell id -u)),node,api)
demo: deps all kube $(if $(filter node,$(PODRES_DEMO)),node-deps image)
	@if [ "$(PODRES_DEMO)" = node ]; then tools/demo-node.sh $(BIN); else tools/demo.sh $(BIN); fi

# make install [PREFIX=/usr/local] [DESTDIR=]: the daemons, their man pages, the systemd units,
# the sysusers entry, and the docs with an example /etc/podres/podresd.yaml; paths in the units
# and man pages (/usr/local/bin, /usr/local/share/doc/podres) are rewritten to BINDIR and DOCDIR. `make uninstall` with the same variables removes exactly that.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
DOCDIR ?= $(PREFIX)/share/doc/podres
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
MAN8 := $(sort $(wildcard man/*.8))
MAN1 := $(sort $(wildcard man/*.1))
UNITS := $(sort $(wildcard deploy/systemd/*.service))
DOCS := README.md LICENSE CHANGELOG.md docs/API.md docs/SYNCER.md docs/EXTENDER.md docs/CRD.md \
	docs/KUBECTL-PODRES.md
INSTALLED = $(PROGS:$(BIN)/%=$(BINDIR)/%) $(MAN8:man/%=$(MANDIR)/man8/%) \
	$(MAN1:man/%=$(MANDIR)/man1/%) $(UNITS:deploy/systemd/%=$(SYSTEMDUNITDIR)/%) \
	$(SYSUSERSDIR)/podres.conf $(addprefix $(DOCDIR)/,$(notdir $(DOCS))) \
	$(DOCDIR)/examples/podresd.yaml

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(SYSTEMDUNITDIR) \
		$(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(DOCDIR)/examples
	install -m 0755 $(PROGS) $(DESTDIR)$(BINDIR)/
	$(if $(MAN1),install -d $(DESTDIR)$(MANDIR)/man1)
	for f in $(MAN8:man/%=8/%) $(MAN1:man/%=1/%) $(UNITS:deploy/systemd/%=u/%); do \
		case $$f in u/*) src=deploy/systemd/$${f#u/} dst=$(SYSTEMDUNITDIR)/$${f#u/} ;; \
			*) src=man/$${f#*/} dst=$(MANDIR)/man$$f ;; esac; \
		sed -e 's|/usr/local/bin/|$(BINDIR)/|g' -e 's|/usr/local/share/doc/podres|$(DOCDIR)|g' \
			$$src > $(DESTDIR)$$dst && chmod 0644 $(DESTDIR)$$dst || exit 1; \
	done
	install -m 0644 deploy/systemd/podres.sysusers $(DESTDIR)$(SYSUSERSDIR)/podres.conf
	install -m 0644 $(DOCS) $(DESTDIR)$(DOCDIR)/
	install -m 0644 deploy/systemd/podresd.yaml $(DESTDIR)$(DOCDIR)/examples/podresd.yaml

# The version the binaries print (--version).
version:
	@echo $(BUILD_VERSION)

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	rmdir $(DESTDIR)$(DOCDIR)/examples $(DESTDIR)$(DOCDIR) 2>/dev/null || true

FORMAT_SRCS = common/*.[ch] server/*.[ch] $(wildcard kube/*.[ch]) $(wildcard syncer/*.[ch]) \
              $(wildcard extender/*.[ch]) $(wildcard plugin/*.[ch]) tests/unit/*/*.c

format:
	clang-format -i $(FORMAT_SRCS)

# .clang-format's layout is clang-format 14's (Debian 12); another major
# version lays some constructs out otherwise, so it is not held to it.
format-check:
	@v=$$(clang-format --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p'); \
	if [ "$$v" != 14 ]; then echo "format-check: skipped: clang-format $$v, the layout is 14's"; \
	else clang-format --dry-run -Werror $(FORMAT_SRCS); fi

lint: all
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance --std=c11 --inline-suppr \
		--suppress=missingIncludeSystem --include=tests/lint/jansson-macros.h \
		common server $(wildcard kube) $(wildcard syncer) $(wildcard extender) $(wildcard plugin)

complexity:
	@pmccabe common/*.c server/*.c $(wildcard kube/*.c) $(wildcard syncer/*.c) $(wildcard extender/*.c) \
		$(wildcard plugin/*.c) | sort -nr | \
		awk -v allow="$$(cat tests/complexity-allow.txt 2>/dev/null | cut -d' ' -f1)" \
		'BEGIN { n = split(allow, a, "\n"); for (i = 1; i <= n; i++) ok[a[i]] = 1 } \
		 $$1 > 15 { split($$NF, f, "("); if (!ok[$$NF]) { print "too complex: " $$0; bad = 1 } } \
		 END { exit bad }'

clean:
	rm -rf build bin var

# Extra targets live in mk/*.mk (fuzz, bench, ...), each owned by its area.
-include $(sort $(wildcard mk/*.mk))

-include $(shell find build -name '*.d' 2>/dev/null)
