# plucky — make (compile), make check (all tests), make run (the demo site),
# make bench (plucky vs Guile's built-in server vs nginx).

GUILE ?= guile
GUILD ?= guild
HOST  ?= 127.0.0.1
PORT  ?= 8080

# Guile's -W2 and -W3 include unused-toplevel, which flags every field
# accessor SRFI-9 generates; these are the warnings that find bugs.
WARNINGS := -Wunbound-variable -Warity-mismatch -Wformat -Wunused-variable -Wshadowed-toplevel -Wmacro-use-before-definition -Wduplicate-case-datum -Wbad-case-datum

# bench/json-schemas.scm: the benchmark documents' JSON types, compiled so
# that tests/web/json.scm and bench/json load them compiled.
SOURCES := $(shell find plucky web -name '*.scm' | sort) bench/json-schemas.scm

.PHONY: all deps check check-fresh run blog-password bench clean cluster cluster-test

ifneq ($(shell command -v guild),)
# Each module compiled after the modules it uses (see scripts/build-order):
# Guile inlines across modules only from compiled ones.  `make -j' would
# lose the order, so a full build takes minutes, one module at a time.
OBJECTS := $(patsubst %.scm,build/%.go,$(shell scripts/build-order $(SOURCES)))
all: deps $(OBJECTS)
else ifeq ($(PLUCKY_DEPS_INSTALLED),)
# No Guile yet: install it, then build in a make that finds it.
all: deps
	@$(MAKE) --no-print-directory all PLUCKY_DEPS_INSTALLED=1
else
$(error guild is still not on PATH after scripts/install-deps)
endif

deps:
	@scripts/install-deps check

# Every object depends on every source: inlined procedures and macros cross
# module boundaries.  So a change to any source rebuilds everything: minutes
# (tests/run loads a module newer than its object from source meanwhile).
build/%.go: %.scm $(SOURCES)
	@mkdir -p $(dir $@)
	@GUILE_AUTO_COMPILE=0 GUILE_LOAD_COMPILED_PATH=build $(GUILD) compile $(WARNINGS) -L . -o $@ $< > $@.log 2>&1 \
	  || { cat $@.log; rm -f $@ $@.log; exit 1; }
	@grep -v '^wrote' $@.log || true
	@rm -f $@.log

check: all
	tests/run

# The tests of a clean clone of HEAD on a bare Debian 12 (as root): proves
# scripts/install-deps names all they need.  See scripts/check-fresh.
check-fresh:
	scripts/check-fresh

# The demo site: the landing page, the news site and the blog, their data
# under $(DATA) (made and seeded on the first run), the status page on for
# loopback clients.
DATA ?= var
run: all
	scripts/install-deps run
	PLUCKY_DATA=$(DATA) bin/plucky serve apps/demo.scm --host $(HOST) --port $(PORT) --status $(if $(filter 0,$(shell id -u)),--allow-root)

# A new password for the blog's admin (the first run prints one, once),
# printed; a running server takes it when it restarts or reloads
# (SIGHUP).
blog-password: all
	PLUCKY_DATA=$(DATA) GUILE_AUTO_COMPILE=0 $(GUILE) -L . -C build -L apps \
	  -c '(use-modules (blog setup)) (reset-admin-password!)'

bench: all
	scripts/install-deps bench
	bench/hello

clean:
	rm -rf build

# The news site on 3 web hosts behind HAProxy over one PostgreSQL, each in
# a network namespace of its own (as root): `make cluster' brings it up
# and waits (Ctrl-C tears it down); `make cluster-test' injects faults
# under write load and counts the writes in PostgreSQL (tests/cluster/).
# See docs/scale-out.md.
cluster: all
	scripts/cluster up

cluster-test: all
	scripts/cluster test

# The tests in headless Chromium: the status page under load
# (tests/observe/browser.scm), the news site and the blog clicked through
# as a newcomer would (tests/apps/news-browser.scm, blog-browser.scm),
# the chat over HTTPS and wss:// in two tabs (tests/apps/chat-browser.scm),
# the demo over HTTP/2 (tests/apps/h2-browser.scm).
# Screenshots go to tests/out/.  Not part of `make check': Debian's
# chromium is large and slow to install.
.PHONY: check-browser
check-browser: all
	scripts/install-deps browser
	PLUCKY_BROWSER_TEST=1 tests/run tests/observe/browser.scm tests/apps/news-browser.scm tests/apps/blog-browser.scm \
	  tests/apps/chat-browser.scm tests/apps/h2-browser.scm
