"""Screenshot a page of a running Dagster UI with headless Chromium (how docs/asset_graph.png
was made). Usage:

    DAGSTER_HOME=$(mktemp -d) INGEST_DATA=/tmp/ui-data .venv/bin/dagster dev -w workspace.yaml -p 3417 &
    .venv/bin/python docs/ui_screenshot.py http://127.0.0.1:3417/asset-groups docs/asset_graph.png

It drives Chromium over the DevTools protocol: open the page, wait until the text
``wait_for`` is on it and the page stopped changing, then capture the viewport.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--hide-scrollbars",
]


async def capture(
    url: str,
    out: str,
    width: int,
    height: int,
    wait_for: str,
    timeout: float,
    port: int,
    expand_groups: bool = False,
    hide: tuple[str, ...] = (),
    zoom_out: int = 0,
) -> None:
    import websockets

    profile = tempfile.mkdtemp(prefix="ui-shot-")
    browser = subprocess.Popen(
        [
            "/usr/bin/chromium",
            *CHROMIUM_FLAGS,
            f"--remote-debugging-port={port}",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + timeout
        targets = None
        while targets is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=2) as reply:
                    targets = [t for t in json.load(reply) if t.get("type") == "page"]
            except OSError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)
        async with websockets.connect(targets[0]["webSocketDebuggerUrl"], max_size=64 * 2**20) as ws:
            counter = 0

            async def call(method: str, **params):
                nonlocal counter
                counter += 1
                await ws.send(json.dumps({"id": counter, "method": method, "params": params}))
                while True:
                    message = json.loads(await ws.recv())
                    if message.get("id") == counter:
                        return message.get("result", {})

            await call(
                "Emulation.setDeviceMetricsOverride",
                width=width,
                height=height,
                deviceScaleFactor=1,
                mobile=False,
            )
            await call("Page.navigate", url=url)
            last, stable = "", 0
            while time.monotonic() < deadline:
                await asyncio.sleep(1.0)
                # dismiss the first-visit "join the community" dialog
                await call(
                    "Runtime.evaluate",
                    expression=(
                        "for (const b of document.querySelectorAll('button')) "
                        "if (b.innerText.trim() === 'Skip') b.click()"
                    ),
                )
                result = await call(
                    "Runtime.evaluate", expression="document.body ? document.body.innerText : ''"
                )
                text = result.get("result", {}).get("value", "")
                stable = stable + 1 if text == last and wait_for in text else 0
                last = text
                if stable >= 3:
                    break
            else:
                print(
                    f"{wait_for!r} did not appear on {url} within {timeout} s; the page says: {last[:300]!r}"
                )
            if expand_groups:  # the graph's shortcut to expand every asset group: Alt+E
                for kind in ("keyDown", "keyUp"):
                    await call(
                        "Input.dispatchKeyEvent",
                        type=kind,
                        modifiers=1,
                        key="e",
                        code="KeyE",
                        windowsVirtualKeyCode=69,
                    )
                await asyncio.sleep(3.0)
                await call("Page.reload")  # the expanded groups are remembered: the reload fits them all
                await asyncio.sleep(45.0)  # the layout of an expanded graph takes a while on a busy machine
            for _ in range(zoom_out):  # Ctrl+wheel down over the graph zooms it out
                await call(
                    "Input.dispatchMouseEvent",
                    type="mouseWheel",
                    x=width * 0.6,
                    y=height * 0.5,
                    deltaX=0,
                    deltaY=100,
                    modifiers=2,
                )
                await asyncio.sleep(0.4)
            for label in hide:  # e.g. the navigation panel, by its button's text
                await call(
                    "Runtime.evaluate",
                    expression=(
                        f"for (const b of document.querySelectorAll('button, a')) "
                        f"if (b.innerText.trim() === {json.dumps(label)}) b.click()"
                    ),
                )
                await asyncio.sleep(2.0)
            shot = await call("Page.captureScreenshot", format="png")
        with open(out, "wb") as handle:
            handle.write(base64.b64decode(shot["data"]))
    finally:
        browser.terminate()
        browser.wait(timeout=30)
        shutil.rmtree(profile, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("out")
    parser.add_argument("--width", type=int, default=1600)
    parser.add_argument("--height", type=int, default=900)
    parser.add_argument("--wait-for", default="chunk_map")
    parser.add_argument("--timeout", type=float, default=240)
    parser.add_argument("--port", type=int, default=int(os.environ.get("CDP_PORT", "9333")))
    parser.add_argument("--expand-groups", action="store_true", help="press Alt+E (expand every group) first")
    parser.add_argument("--click", action="append", default=[], help="click the button with this text first")
    parser.add_argument("--zoom-out", type=int, default=0, help="mouse-wheel steps to zoom the graph out")
    args = parser.parse_args()
    asyncio.run(
        capture(
            args.url,
            args.out,
            args.width,
            args.height,
            args.wait_for,
            args.timeout,
            args.port,
            args.expand_groups,
            tuple(args.click),
            args.zoom_out,
        )
    )


if __name__ == "__main__":
    main()
