#!/usr/bin/env bash
# Takes the documentation's pictures of Spark's Streaming tab (docs/images/streaming-tab.png) and of
# one batch page with its offset ranges (docs/images/streaming-batch.png): a local Kafka broker, an
# exactly-once stream (createExactlyOnceStream into a SQLite store) with Spark's UI on
# (tests/integration/streaming_tab_driver.py), headless Chromium.
# Installs Chromium (Debian package) if needed; not part of `make test`. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
bash scripts/install-deps.sh chromium
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" - <<'EOF'
import json
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from dstream_exactly_once.testing import LocalKafka
from dstream_exactly_once.testing._process import free_port


def shot(url: str, out: Path) -> None:
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1400,1100", f"--screenshot={out}", url],
                   check=True, capture_output=True, timeout=120)
    print(f"[screenshots] {out}")


with LocalKafka() as kafka, tempfile.TemporaryDirectory() as tmp:
    topic = "orders-" + uuid.uuid4().hex[:6]
    kafka.create_topic(topic, 3)
    kafka.produce(topic, range(3000), partitions=3)
    port, out, log = str(free_port()), Path(tmp) / "tab.json", Path(tmp) / "driver.log"
    driver = subprocess.Popen([sys.executable, "-m", "tests.integration.streaming_tab_driver", "eo-kafka",
                               kafka.bootstrap, topic, "1500", f"sqlite:///{tmp}/tab.db", port, str(out), "60"],
                              stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
    try:
        assert driver.stdout is not None
        for line in driver.stdout:
            if line.startswith("READY "):
                break
        else:
            raise SystemExit("the driver stopped before its UI was ready:\n" + log.read_text()[-3000:])
        ui = line.split()[1]
        pages = json.loads(out.read_text())["pages"]
        time.sleep(3)
        images = Path("docs/images")
        shot(f"{ui}/streaming/", images / "streaming-tab.png")
        shot(f"{ui}/streaming/batch/?id={min(int(k) for k in pages)}", images / "streaming-batch.png")
    finally:
        driver.terminate()  # its log (in the temp dir) then shows the stopped context's errors
        driver.wait(60)
EOF
