"""Headless Chromium for the MiniWoB++ backend: finding it and starting it.

Chromium and chromedriver come from ``MINIWOB_CHROME_BINARY`` /
``MINIWOB_CHROMEDRIVER`` when set, else the Debian packages' paths
(``/usr/bin/chromium``, ``/usr/bin/chromedriver``), else ``PATH``. Selenium
is always handed both paths, so it never runs Selenium Manager to download a
driver. ``find_browser`` raises one ``ChromiumNotFoundError`` naming the apt
packages ``chromium chromium-driver`` when either is missing; call it before
any other work.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
from collections.abc import Sequence
from typing import Any

from rla_jax.envs.gui.driver_guard import guarded_chromedriver

DEFAULT_CHROME_BINARIES = ("/usr/bin/chromium", "chromium", "chromium-browser")
DEFAULT_CHROMEDRIVERS = ("/usr/bin/chromedriver", "chromedriver")
APT_HINT = (
  "install them with `apt-get install -y chromium chromium-driver` "
  "(Debian/Ubuntu) or point MINIWOB_CHROME_BINARY and MINIWOB_CHROMEDRIVER "
  "at a Chromium and its matching chromedriver"
)
CHROME_ARGUMENTS = (
  "--headless=new",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-dev-shm-usage",
  "--hide-scrollbars",
  "--mute-audio",
  "--no-first-run",
  "--disable-extensions",
  "--force-color-profile=srgb",
)


class ChromiumNotFoundError(RuntimeError):
  """Chromium or chromedriver (or the selenium / miniwob packages) is absent."""


@dataclasses.dataclass(frozen=True)
class BrowserPaths:
  """Where Chromium and its chromedriver are.

  Attributes:
    chrome_binary: The Chromium executable.
    chromedriver: The matching chromedriver executable.
  """

  chrome_binary: str
  chromedriver: str


def _resolve_executable(variable: str, defaults: Sequence[str]) -> str | None:
  configured = os.environ.get(variable)
  candidates = [configured] if configured else list(defaults)
  for candidate in candidates:
    found = shutil.which(candidate)
    if found:
      return found
  return None


def find_browser() -> BrowserPaths:
  """Locates Chromium and chromedriver (see the module docstring).

  Returns:
    Their paths.

  Raises:
    ChromiumNotFoundError: One of them, or the selenium / miniwob package,
      is missing; the message names what to install.
  """
  binary = _resolve_executable("MINIWOB_CHROME_BINARY", DEFAULT_CHROME_BINARIES)
  driver = _resolve_executable("MINIWOB_CHROMEDRIVER", DEFAULT_CHROMEDRIVERS)
  missing = []
  if binary is None:
    where = os.environ.get("MINIWOB_CHROME_BINARY") or "/usr/bin/chromium"
    missing.append(f"Chromium (looked for {where})")
  if driver is None:
    where = os.environ.get("MINIWOB_CHROMEDRIVER") or "/usr/bin/chromedriver"
    missing.append(f"chromedriver (looked for {where})")
  if missing:
    raise ChromiumNotFoundError(
      f"MiniWoB++ needs {' and '.join(missing)}: {APT_HINT}"
    )
  for package in ("selenium", "miniwob"):
    if importlib.util.find_spec(package) is None:
      raise ChromiumNotFoundError(
        f"MiniWoB++ needs the Python package {package!r}: "
        "pip install -r requirements.txt (miniwob, selenium)"
      )
  return BrowserPaths(binary, driver)


def start_driver(
  paths: BrowserPaths, width_css: int, height_css: int, scale: int
) -> Any:
  """Starts one headless Chromium with a fixed viewport.

  The viewport is exactly ``width_css`` x ``height_css`` CSS pixels at
  ``scale`` device pixels each (DevTools
  ``Emulation.setDeviceMetricsOverride``), so a screenshot is
  [height_css * scale, width_css * scale, 3].

  Args:
    paths: From ``find_browser``.
    width_css: Viewport width in CSS pixels.
    height_css: Viewport height in CSS pixels.
    scale: Device pixels per CSS pixel.

  Returns:
    The Selenium ``webdriver.Chrome``.
  """
  from selenium import webdriver
  from selenium.webdriver.chrome.service import Service

  options = webdriver.ChromeOptions()
  for argument in CHROME_ARGUMENTS:
    options.add_argument(argument)
  options.binary_location = paths.chrome_binary
  # chromedriver runs under driver_guard, so the browser dies with this
  # process even when it is killed (see that module).
  service = Service(executable_path=guarded_chromedriver(paths.chromedriver))
  driver = webdriver.Chrome(service=service, options=options)
  try:
    driver.execute_cdp_cmd(
      "Emulation.setDeviceMetricsOverride",
      {
        "width": width_css,
        "height": height_css,
        "deviceScaleFactor": scale,
        "mobile": False,
      },
    )
  except BaseException:
    driver.quit()
    raise
  return driver
