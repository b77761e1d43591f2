# Entry points; everything real lives in scripts/ and meson.build.
BUILD ?= build
ASAN_BUILD ?= build-asan

.PHONY: all deps build check demo bench fuzz clean

all: build

deps:
	bash scripts/install-deps.sh

build: deps
	bash scripts/build.sh $(BUILD)

check: deps
	bash scripts/check.sh

demo: deps
	bash scripts/demo.sh

bench: deps
	bash scripts/bench.sh

fuzz: deps
	bash scripts/fuzz.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz out
