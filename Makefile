# Two entry points for a fresh Debian 12 machine (see README.md):
#   make demo   installs what is missing, builds, and runs Trident on a built-in example
#   make test   installs what is missing, builds, and runs the whole test suite (ctest)
#   make fuzz / make sanitize   the readers' libFuzzer targets / the suite under ASan + UBSan (see below)
BUILD ?= build
JOBS  ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release
# ccache, where installed, keeps rebuilds of unchanged files cheap (CI and fresh clones included):
# paths are taken relative to this folder so clones in other folders share the cache.
ifneq ($(shell command -v ccache),)
CMAKE_FLAGS += -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache
export CCACHE_BASEDIR ?= $(CURDIR)
endif

.PHONY: deps configure build demo test bench fuzz sanitize clean

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@bash scripts/demo.sh $(BUILD)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: build
	@bash bench/run_all.sh $(BUILD)

# The checking build (clang, ASan + UBSan, CPU only) has its own folder, build-sanitize:
#   make fuzz       every reader's libFuzzer target on its corpus, FUZZ_SECONDS (20) each
#   make sanitize   the test suite sanitized (scripts/sanitize.sh names the tests it leaves out)
fuzz: deps
	@bash scripts/fuzz.sh build-sanitize

sanitize: deps
	@bash scripts/sanitize.sh build-sanitize

clean:
	rm -rf $(BUILD)
