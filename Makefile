# samebits: two commands on a fresh machine.
#   make run    installs what is missing, builds, runs the main job on the bundled data
#   make test   same set-up, then the full test suite through CTest
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_ARGS ?=
DEBIAN_PACKAGES := cmake g++ make git libgtest-dev libgmock-dev libbenchmark-dev libfmt-dev \
                   nlohmann-json3-dev libcli11-dev libxxhash-dev \
                   python3-dev python3-venv ccache ninja-build \
                   libopenmpi-dev openmpi-bin

.PHONY: run test deps build bench clean

deps:
	@missing=""; for p in $(DEBIAN_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "samebits: installing Debian packages:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

# ccache (a Debian package above) serves every compiler call when it is there.
LAUNCHER := $(if $(shell command -v ccache),-DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
              -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON $(LAUNCHER) \
	  $(CMAKE_ARGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

run: build
	./scripts/main_job.sh $(BUILD)

test: build python
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600
	$(MAKE) pytest

# The Python package: a project-local virtual environment with torch (pinned to the GPU machine's
# 2.11), built into it from the main build tree (scikit-build-core reuses $(BUILD), so the library
# is not compiled twice), then its tests.
.PHONY: venv python pytest
VENV ?= .venv
PY := $(VENV)/bin/python
PIP_PACKAGES := torch==2.11.* torch-geometric pytest numpy nanobind scikit-build-core
venv: $(VENV)/.samebits-venv
$(VENV)/.samebits-venv: | deps
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(PIP_PACKAGES)
	touch $@

python: build venv
	CMAKE_GENERATOR="$$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' $(BUILD)/CMakeCache.txt)" \
	  $(PY) -m pip install -q --no-build-isolation --no-deps -Cbuild-dir=$(BUILD) \
	  -Ccmake.define.SAMEBITS_BUILD_TESTS=ON -Ccmake.define.SAMEBITS_BUILD_BENCH=ON .

pytest:
	$(PY) -m pytest -q python/tests

bench: build
	$(BUILD)/bench/samebits_bench_cpu

clean:
	rm -rf $(BUILD) $(VENV)
