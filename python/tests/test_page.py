"""The campaign page (`index.html`) of a real campaign, in a real headless browser (Debian's chromium through
selenium): it loads from disk without console errors, has one row per entry of the run, every image decodes,
and every link resolves (an anchor to an element of the page, a file link to a file of the run, a web link to a
well-formed https address)."""
from __future__ import annotations

import pathlib
import shutil
import urllib.parse

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

CAMPAIGN = ["fuzz", "--target", "ort", "--tests", "2000", "--seed", "21", "--jobs", "2"]


def browser() -> webdriver.Chrome:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    assert chromium and driver, (
        "the campaign page's test needs chromium and chromedriver: apt-get install chromium chromium-driver "
        "(scripts/test.sh installs them when it runs as root)"
    )
    opts = Options()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=opts)


def test_the_campaign_page_loads_cleanly_lists_every_entry_and_every_link_resolves(oatest, tmp_path):
    run = tmp_path / "run"
    oatest(*CAMPAIGN, "--out", run)
    entries = sorted(run.glob("*/*/bug.json"))
    assert entries, "the campaign filed no entry: the page test needs a run with entries"
    page = run / "index.html"
    assert page.exists()
    assert "http-equiv=\"refresh\"" not in page.read_text(), "a finished campaign's page does not reload itself"
    d = browser()
    try:
        d.get(page.as_uri())
        severe = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
        assert not severe, f"console errors: {severe}"
        rows = d.find_elements(By.CSS_SELECTOR, "#entries-table tbody tr")
        assert len(rows) == len(entries), f"{len(rows)} rows for {len(entries)} entries"
        articles = d.find_elements(By.CSS_SELECTOR, "article")
        assert len(articles) == len(entries)
        images = d.find_elements(By.TAG_NAME, "img")
        assert any("discovery" in (i.get_attribute("alt") or "").lower() for i in images), "the discovery curve"
        for img in images:
            assert d.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", img), (
                f"image does not decode: {img.get_attribute('alt')}"
            )
        links = d.find_elements(By.TAG_NAME, "a")
        assert links
        for a in links:
            href = a.get_attribute("href")
            url = urllib.parse.urlparse(href)
            if url.scheme == "file":
                target = pathlib.Path(urllib.parse.unquote(url.path))
                if url.fragment:
                    assert target == page, href
                    assert d.find_elements(By.ID, url.fragment), f"no element with id {url.fragment!r}"
                else:
                    assert target.is_file(), f"broken link: {href}"
                    assert run in target.parents, f"a link out of the run directory: {href}"
            else:
                assert url.scheme == "https" and url.netloc, f"not a well-formed web link: {href}"
    finally:
        d.quit()
