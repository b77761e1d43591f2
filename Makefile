# Entry points; everything real lives in scripts/ and meson.build.
# `make` only builds (and says to run `make deps` if a build package is
# missing); `make deps` installs the build and test packages; check, demo
# and the lab's runs (bench, fuzz, soak) install what is missing first.
BUILD ?= build
ASAN_BUILD ?= build-asan

.PHONY: all deps build check demo bench fuzz soak clean

all: build

deps:
	bash scripts/install-deps.sh test

build:
	@bash scripts/install-deps.sh build --check
	bash scripts/build.sh $(BUILD)

# scripts/check.sh and scripts/demo.sh install what is missing themselves.
check:
	bash scripts/check.sh

demo:
	bash scripts/demo.sh

bench: deps
	bash scripts/bench.sh

# FUZZ_TIME seconds per target (default 1800), FUZZ_TARGETS, FUZZ_MINIMISE=1.
fuzz: deps
	bash scripts/fuzz.sh

# SOAK_TIME seconds (default 600), SOAK_SEED to replay; not part of check.
soak: deps
	bash scripts/soak.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz build-release-gcc build-release-clang out
