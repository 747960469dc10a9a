"""Screenshots of collapsewatch's series and alert in TensorBoard's own UI, from a real tiny TRL run (headless Chromium).

    .venv/bin/python bench/tracker_screenshots.py [--out docs/img] [--keep DIR]

1. Trains a tiny TRL ``GRPOTrainer`` on CPU (:func:`collapsewatch.models.tiny_model_and_tokenizer`, nothing
   downloaded) with ``report_to=["tensorboard"]``, watched by ``watch(trainer, ..., sinks=["tensorboard:TB"])``.
   HF's TensorBoard callback and the sink write the same run folder ``TB/trl-exp``. Its reward function has a bug
   from step 7 on: it returns ``None`` (TRL: "not scored", NaN) for the first completion of each batch, as a parser
   that fails on some outputs does; collapsewatch's ``nonfinite`` detector raises a critical episode on it.
   ``num_iterations=2`` trains each generation twice, so the second pass has importance ratios (A>0 ratio series).
2. Serves ``TB`` with TensorBoard on 127.0.0.1 and screenshots its Time Series page filtered on ``collapsewatch``
   (``tensorboard-series.png``) and its Text tab (``tensorboard-alert.png``: the episode as it happened, the verdict
   and the episodes table written at the end of ``train()``).

Everything shown comes from that run; nothing is typed in. About a minute on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

RUN = "trl-exp"
STEPS, BUG_FROM = 12, 7  # the reward bug starts with the generation of step BUG_FROM (TRL's global_step BUG_FROM - 1)
SENTINELS = [("the cat sat", " on the mat", True), ("a dog ran", " banana", False)]
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def train(root: Path) -> Path:
    """The watched TRL run: store ``root/store``, TensorBoard folder ``root/tb`` (returned)."""
    tb = root / "tb"
    os.environ["TENSORBOARD_LOGGING_DIR"] = str(tb / RUN)  # HF's TensorBoardCallback: the sink's run folder
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from collapsewatch.integrations.trl import watch
    from collapsewatch.models import tiny_model_and_tokenizer

    model, tokenizer = tiny_model_and_tokenizer(seed=0)

    def share_of_a(completions, trainer_state, **kwargs):  # the bug: None for the first completion from BUG_FROM on
        broken = trainer_state.global_step >= BUG_FROM - 1
        return [None if broken and i == 0 else c.count("a") / max(1, len(c)) for i, c in enumerate(completions)]

    args = GRPOConfig(output_dir=str(root / "trl-out"), max_steps=STEPS, per_device_train_batch_size=4,
                      num_generations=4, num_iterations=2, max_completion_length=8, logging_steps=1,
                      learning_rate=5e-2, use_cpu=True, report_to=["tensorboard"], save_strategy="no",
                      disable_tqdm=True)
    prompts = ["the cat sat", "say hello", "spell banana"] * 8
    trainer = GRPOTrainer(model=model, reward_funcs=share_of_a, args=args, processing_class=tokenizer,
                          train_dataset=Dataset.from_dict({"prompt": prompts}))
    watch(trainer, store=root / "store", run=RUN, sinks=[f"tensorboard:{tb}"], sentinels=SENTINELS,
          sentinel_every=2)
    trainer.train()
    return tb


def serve(logdir: Path) -> tuple[subprocess.Popen, str]:
    """TensorBoard on a free 127.0.0.1 port, once it answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # run from the folder above, so the page names the log dir by its own name, not by a path of this machine
    proc = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", logdir.name, "--host",
                             "127.0.0.1", "--port", str(port)], cwd=logdir.parent, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    for _ in range(120):
        try:
            with urllib.request.urlopen(url + "data/runs", timeout=2) as r:
                if RUN.encode() in r.read():
                    return proc, url
        except OSError:
            pass
        if proc.poll() is not None:
            raise SystemExit(f"tensorboard exited with code {proc.returncode} (--logdir {logdir})")
        time.sleep(0.5)
    proc.terminate()
    raise SystemExit(f"tensorboard did not list run {RUN} within 60 s (--logdir {logdir})")


def shoot(url: str, out: Path) -> list[Path]:
    """The Time Series page filtered on collapsewatch (smoothing 0, outliers kept) and the Text tab."""
    from playwright.sync_api import sync_playwright

    series, alert = out / "tensorboard-series.png", out / "tensorboard-alert.png"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1480}, device_scale_factor=1)
        page.goto(url + "?smoothing=0&tagFilter=collapsewatch#timeseries")
        page.get_by_text("Ignore outliers in chart scaling").click()  # show every point, not a clipped axis
        page.locator("button[aria-label='Close side pane']").click()
        page.wait_for_selector("text=9 cards")
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(1500)
        page.screenshot(path=series)
        page.set_viewport_size({"width": 1600, "height": 1000})
        page.goto(url + "#text&tagFilter=collapsewatch")
        page.wait_for_selector("text=collapsewatch/verdict/text_summary")
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(1500)
        page.screenshot(path=alert)
        browser.close()
    return [series, alert]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/img")
    ap.add_argument("--keep", help="train into this folder and keep it (default: a temporary folder)")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(a.keep or tmp).resolve()
        tb = train(root)
        proc, url = serve(tb)
        try:
            shots = shoot(url, out)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    print("screenshots: " + ", ".join(f"{s} ({s.stat().st_size // 1024} KB)" for s in shots))


if __name__ == "__main__":
    main()
