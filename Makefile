# Two commands do all set-up on a fresh machine with only python3:
#   make verify  - bootstrap .venv, run the default suites on the emulated MLU, write reports/latest/
#   make test    - bootstrap .venv, run mluverify's own tests
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: verify verify-inductor verify-real verify-offline verify-zoo test test-e2e test-heavy gate bench venv browser

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[vision,dev,training,ort]'
	$(BIN)/python -c "import mluverify.device"  # builds the device's C++ hooks once (mluverify/device/build/)
	$(BIN)/python -c "from mluverify.dump._fused import native; native()"  # and the Dumper's (mluverify/dump/build/)
	touch $(STAMP)

verify: $(STAMP)
	$(BIN)/mluverify run suites

# The networks and one case per op x dtype of the op suites, compiled by TorchInductor on the CPU
# (docs/backends.md); compiled code is cached in TORCHINDUCTOR_CACHE_DIR (~/.cache/mluverify/inductor).
verify-inductor: $(STAMP)
	$(BIN)/mluverify run suites/networks suites/ops suites/opinfo --target cpu:inductor --report reports/runs/inductor

# The op suites, OpInfo samples and networks on each real compiler whose extra is installed
# (.venv/bin/pip install -c constraints.txt -e '.[ort-dynamo,openvino,executorch,iree]': out of the default
# install; docs/backends.md), one report per target under reports/runs/real-<target>; a target whose
# package is missing is skipped with its install line (the back end's own reason).
REAL_TARGETS := ort:cpu ort:dynamo openvino:cpu openvino:default executorch:xnnpack tvm:cpu iree:cpu
UNAVAILABLE := from mluverify.core.backends import BackendRegistry as R; from mluverify.core.plugin_manager import \
  call_hook, new_plugin_manager; import sys; r = R(); call_hook(new_plugin_manager(), "mluverify_add_backends", \
  registry=r); t, b = r.resolve(sys.argv[1]); print(b.unavailable_reason() or b.mode_unavailable_reason(t.mode) or "")
verify-real: $(STAMP)
	@failed=; for t in $(REAL_TARGETS); do \
	  why=$$($(BIN)/python -c '$(UNAVAILABLE)' $$t) || exit 1; \
	  if [ -n "$$why" ]; then echo "verify-real: $$t skipped: $$why"; continue; fi; \
	  $(BIN)/mluverify run suites/ops suites/opinfo suites/networks --target $$t \
	    --report reports/runs/real-$$(echo $$t | tr : -) || failed="$$failed $$t"; \
	done; if [ -n "$$failed" ]; then echo "verify-real: failed on$$failed"; exit 1; fi

# The seeds' YOLOv3 offline multicore demo on the offline target, its heavy cases included (the
# whole core number x input format grid, the full-size network): docs/fusion.md.
verify-offline: $(STAMP)
	$(BIN)/mluverify run suites/networks/test_yolov3.py --target mlu:offline --report reports/runs/offline -- --mlu-heavy

# The model zoo (suites/zoo: PyTorch's timm list and 64 Hugging Face architectures; docs/zoo.md), out of
# make verify, on ZOO_TARGETS, split across processes (-n auto; ZOO_ARGS="--splits 4 --group 1" splits it
# across CI jobs with pytest-split), failing cases dumped for dump-diff; the dashboard is
# reports/runs/zoo/zoo.md. Needs the zoo extra: .venv/bin/pip install -c constraints.txt -e '.[zoo]'.
ZOO_TARGETS ?= mlu:cnnl mlu:cnml
verify-zoo: $(STAMP)
	$(BIN)/mluverify run suites/zoo $(foreach t,$(ZOO_TARGETS),--target $(t)) --report reports/runs/zoo -- \
	  --mlu-dump=fail $(ZOO_ARGS)

# The default suites against the committed baseline; fails on any regression (CI runs it).
gate: $(STAMP)
	$(BIN)/mluverify expectations check --fail-on-uncapped  # every accuracy waiver has a ceiling
	$(BIN)/mluverify run suites -- --mlu-baseline reports/baseline --mlu-gate

# The end-to-end test files (marker e2e: fresh pytest and CLI processes, networks, a browser) are a
# target of their own, so that make test stays within 10 minutes on 2 cores.
test: $(STAMP) browser
	$(BIN)/python -m pytest -q -n auto --dist worksteal -m "not e2e"

test-e2e: $(STAMP) browser
	$(BIN)/python -m pytest -q -n auto --dist worksteal -m e2e

# The tests marked heavy (kill loops, whole-suite subprocess runs), left out of make test.
test-heavy: $(STAMP) browser
	$(BIN)/python -m pytest -q -n auto --dist worksteal --heavy -m heavy

# Headless Chromium and its driver for the report's browser tests (tests/report), Debian's
# packages, installed when missing (as root). Elsewhere it says what to install: the tests then
# skip, except under CI=true, where a missing browser fails them.
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	else echo "make browser: install the Debian packages chromium and chromium-driver for tests/report's browser tests"; fi

bench: $(STAMP)
	for b in benchmarks/*.py; do $(BIN)/python $$b || exit 1; done
