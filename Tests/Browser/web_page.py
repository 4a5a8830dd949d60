"""The web page in a real browser: headless Chromium driven through WebDriver (selenium).

    python3 web_page.py URL_WITH_TOKEN RUN_DIR SCREENSHOT_DIR [sessions TETHER]

URL_WITH_TOKEN is what `tether web` prints; RUN_DIR the set's run directory (its
compose/state.json names the programs' pids, to kill them). With `sessions` and the path of
the tether command, only the check of a session switch runs (a set speaking OpenClaw). Each check prints one line,
`ok NAME (seconds)` or `FAILED NAME: why`, saves a screenshot on failure, and the exit
status is the number of failures.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

URL, RUN, SHOTS = sys.argv[1], sys.argv[2], sys.argv[3]
SESSIONS_ONLY = len(sys.argv) > 5 and sys.argv[4] == "sessions"
TETHER = sys.argv[5] if SESSIONS_ONLY else None
BASE = URL.split("?")[0]
HOST = urllib.parse.urlparse(URL).netloc


def browser():
    options = Options()
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1000,800"):
        options.add_argument(argument)
    for path in ("/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if os.path.exists(path):
            options.binary_location = path
    service = None
    if os.path.exists("/usr/bin/chromedriver"):
        from selenium.webdriver.chrome.service import Service
        service = Service("/usr/bin/chromedriver")
    return webdriver.Chrome(options=options, service=service)


def wait(condition, timeout=20, what="the condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            result = condition()
            if result:
                return result
        except Exception as error:  # the page is changing under us: try again
            last = error
        time.sleep(0.05)
    raise AssertionError(f"{what} did not happen within {timeout} s" + (f" (last error: {last})" if last else ""))


def pid(name):
    with open(os.path.join(RUN, "compose", "state.json"), encoding="utf-8") as file:
        for program in json.load(file)["programs"]:
            if program["name"] == name:
                return program.get("pid")
    return None


def kill_and_await_restart(name):
    old = pid(name)
    os.kill(old, signal.SIGKILL)
    wait(lambda: pid(name) not in (None, old), 30, f"{name} restarted")


def conversation(driver):
    """The conversation as (id, text) pairs, read in one step: the page redraws as it changes."""
    return [tuple(pair) for pair in driver.execute_script(
        "return [...document.querySelectorAll('#conversation li[data-id]')].map((li) => [li.dataset.id, li.innerText])")]


def send(driver, text):
    box = driver.find_element(By.ID, "message")
    box.send_keys(text)
    box.send_keys(Keys.ENTER)


def check_first_frame_without_websocket(driver):
    """The stored transcript is in the HTML itself: shown with the page's scripts off, so no
    WebSocket is ever opened."""
    driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
    try:
        driver.get(BASE)
        texts = [item.text for item in driver.find_elements(By.CSS_SELECTOR, "#conversation li")]
        assert any(text.startswith("You: stored before the page") and "delivered" in text for text in texts), \
            f"the first frame lacks the stored message: {texts}"
        assert any(text.startswith("Opta: You said: stored before the page") for text in texts), f"the first frame lacks the reply: {texts}"
    finally:
        driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": False})
    return f"{len(texts)} entries in the HTML with scripts off"


def check_focus_and_icon(driver):
    """At load the composer has the focus, so typing goes there; the page names an icon that
    is served (a page naming none makes the browser ask for /favicon.ico, a 404 here)."""
    driver.get(BASE)
    wait(lambda: driver.execute_script("return document.activeElement && document.activeElement.id") == "message", 10,
         "the composer focused at load")
    icon = driver.execute_script("""
        const link = document.querySelector('link[rel="icon"]');
        if (!link) return null;
        const answer = await fetch(link.href, {credentials: 'same-origin'});
        return [answer.status, answer.headers.get('content-type')];""")
    assert icon == [200, "image/svg+xml"], f"the page's icon: {icon}"
    return "composer focused at load; icon served as image/svg+xml"


def replies_to(driver, message_id):
    return driver.execute_script(
        "return [...document.querySelectorAll('#conversation li.bot')].filter((li) => li.dataset.replyTo === arguments[0]).map((li) => li.innerText)",
        message_id)


def check_send_delivered_and_reply_grows(driver):
    driver.get(BASE)
    send(driver, "hello from the browser")
    mine = wait(lambda: [item for item in conversation(driver) if item[1].startswith("You: hello from the browser") and "delivered" in item[1]],
                20, "the message marked delivered")
    message_id = mine[0][0]
    lengths = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        replies = replies_to(driver, message_id)
        if replies:
            assert len(replies) == 1, f"the reply is shown {len(replies)} times: {replies}"
            if not lengths or len(replies[0]) != lengths[-1]:
                lengths.append(len(replies[0]))
            if replies[0].endswith("You said: hello from the browser"):
                break
        time.sleep(0.02)
    assert lengths and lengths == sorted(lengths), f"the reply did not grow in place: lengths {lengths}"
    assert len(lengths) >= 2, f"the reply came whole, not growing: lengths {lengths}"
    if os.environ.get("TETHER_PAGE_SHOT"):  # the picture in docs/
        time.sleep(0.5)
        driver.save_screenshot(os.environ["TETHER_PAGE_SHOT"])
    return f"delivered mark; the reply grew in place through {len(lengths)} lengths"


def live(driver):
    """Waits until the page hears the bus through its WebSocket (the network comes only that way)."""
    wait(lambda: driver.find_element(By.ID, "status-network").get_attribute("textContent") != "unknown", 20, "the page live on the bus")


def check_banner_through_a_gateway_restart(driver):
    driver.get(BASE)
    live(driver)
    wait(lambda: "Connected" in driver.find_element(By.ID, "status-connection").get_attribute("textContent"), 20, "connected")
    banner = driver.find_element(By.ID, "banner")
    assert banner.get_attribute("role") == "status" and banner.get_attribute("aria-live") == "polite", "the banner is not a live region"
    # Every change of the banner's words, recorded by the page as it happens.
    driver.execute_script("""
        window.bannerHistory = [];
        const words = document.getElementById('banner-words');
        new MutationObserver(() => window.bannerHistory.push(words.textContent)).observe(words, {childList: true, characterData: true, subtree: true});
    """)
    kill_and_await_restart("gateway")
    wait(lambda: "Reconnected" in driver.execute_script("return window.bannerHistory"), 40, "the banner saying Reconnected")
    history = driver.execute_script("return window.bannerHistory")
    said = [words for words in history if "Reconnecting" in words or "Connection lost" in words]
    assert said, f"the banner never said Reconnecting: {history}"
    assert history.index(said[0]) < history.index("Reconnected"), f"in the wrong order: {history}"
    seen = said[0]
    button = driver.find_element(By.ID, "reconnect")
    assert button.tag_name == "button", "the reconnect action is not a button (keyboard)"
    return f"banner: {seen!r}, then 'Reconnected'"


def check_web_restart_loses_nothing(driver):
    driver.get(BASE)
    live(driver)
    wait(lambda: "Connected" in driver.find_element(By.ID, "status-connection").get_attribute("textContent"), 20, "connected")
    kill_and_await_restart("web")
    wait(lambda: "tether-web" in driver.find_element(By.ID, "banner-words").get_attribute("textContent"), 10, "the page noticing tether-web left")
    # Typed while tether-web is down: a message sent, and a draft left in the box.
    send(driver, "sent while tether-web was down")
    driver.find_element(By.ID, "message").send_keys("a draft kept")
    wait(lambda: [item for item in conversation(driver) if "sent while tether-web was down" in item[1] and "delivered" in item[1]],
         40, "the message typed while tether-web was down, delivered")
    time.sleep(1.0)
    texts = [text for _, text in conversation(driver)]
    ids = [identifier for identifier, _ in conversation(driver)]
    assert len(ids) == len(set(ids)), f"a message is shown twice: {texts}"
    assert sum(text.startswith("You: sent while tether-web was down") for text in texts) == 1, f"shown {texts}"
    assert driver.find_element(By.ID, "message").get_attribute("value") == "a draft kept", "the draft was lost"
    # The draft is kept in snapd: a reload shows it.
    time.sleep(1.0)
    driver.get(BASE)
    value = driver.find_element(By.ID, "message").get_attribute("value")
    assert value == "a draft kept", f"the draft after a reload: {value!r}"


def check_keyboard_dark_scheme_and_zoom(driver):
    """Every control reachable with Tab and labelled; a dark scheme; no sideways scrolling at 200%."""
    driver.get(BASE)
    wait(lambda: "Connected" in driver.find_element(By.ID, "status-connection").get_attribute("textContent"), 20, "connected")
    def focused():
        return driver.execute_script(
            "const e = document.activeElement; return e.id || e.tagName.toLowerCase() + (e.textContent ? ':' + e.textContent.trim() : '')")
    driver.find_element(By.ID, "message").click()
    reached = [focused()]
    driver.switch_to.active_element.send_keys(Keys.TAB)
    reached.append(focused())
    driver.switch_to.active_element.send_keys(Keys.SHIFT, Keys.TAB)
    driver.switch_to.active_element.send_keys(Keys.SHIFT, Keys.TAB)
    reached.append(focused())
    for control in ("message", "button:Send", "summary:Status"):
        assert control in reached, f"{control} is not reached with Tab: {reached}"
    unlabelled = driver.execute_script("""
        return [...document.querySelectorAll('textarea, input, button')].filter((e) => !e.hidden && !(e.labels && e.labels.length) &&
            !e.getAttribute('aria-label') && !e.textContent.trim()).map((e) => e.outerHTML)""")
    assert not unlabelled, f"controls without a label: {unlabelled}"
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    dark = driver.execute_script("return getComputedStyle(document.body).backgroundColor")
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "light"}]})
    light = driver.execute_script("return getComputedStyle(document.body).backgroundColor")
    assert dark != light, f"the same background in both schemes: {dark}"
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 500, "height": 400, "deviceScaleFactor": 2, "mobile": False})
    driver.execute_script("document.body.style.zoom = '200%'")
    sideways = driver.execute_script("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
    driver.execute_script("document.body.style.zoom = ''")
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    assert sideways <= 1, f"at 200% the page scrolls sideways by {sideways} px"
    return f"Tab reaches {', '.join(dict.fromkeys(reached))}; dark background {dark}; no sideways scrolling at 200%"


def request(path, headers=None, method="GET"):
    connection = socket.create_connection((HOST.split(":")[0], int(HOST.split(":")[1])), timeout=10)
    headers = dict(headers or {})
    headers.setdefault("Connection", "close")
    lines = [f"{method} {path} HTTP/1.1"] + [f"{name}: {value}" for name, value in headers.items()] + ["", ""]
    connection.sendall("\r\n".join(lines).encode())
    answer = b""
    # The head is enough (a WebSocket that opened stays open).
    while b"\r\n\r\n" not in answer:
        chunk = connection.recv(65536)
        if not chunk:
            break
        answer += chunk
    connection.close()
    head = answer.split(b"\r\n\r\n", 1)[0].decode(errors="replace")
    return int(head.split(" ")[1]), head


def check_strangers_are_refused(_driver):
    token = urllib.parse.parse_qs(urllib.parse.urlparse(URL).query)["token"][0]
    status, _ = request("/", {"Host": HOST})
    assert status == 401, f"no token: {status}"
    status, head = request("/?token=" + token, {"Host": HOST})
    assert status == 303 and "HttpOnly" in head and "SameSite=Strict" in head, f"the first URL: {status} {head}"
    cookie = f"tether_web={token}"
    status, head = request("/", {"Host": HOST, "Cookie": cookie})
    assert status == 200 and "content-security-policy: default-src 'none'" in head.lower(), f"with the cookie: {status} {head}"
    status, _ = request("/", {"Host": "evil.example:" + HOST.split(":")[1], "Cookie": cookie})
    assert status == 421, f"a wrong Host (DNS rebinding): {status}"
    upgrade = {"Host": HOST, "Cookie": cookie, "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
               "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
    refused, _ = request("/ws", dict(upgrade, Origin="http://evil.example"))
    assert 400 <= refused < 500, f"a cross-site Origin on the WebSocket: {refused}"
    status, _ = request("/ws", dict(upgrade, Origin="http://" + HOST))
    assert status == 101, f"the page's own Origin on the WebSocket: {status}"
    return f"no token 401, token URL 303 with an HttpOnly SameSite=Strict cookie, wrong Host 421, cross-site Origin on the WebSocket {refused}"


def use_session(key):
    done = subprocess.run([TETHER, "session", "use", key, "--run-dir", RUN], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, f"tether session use {key}: {done.returncode} {done.stderr}"
    return done.stdout.strip()


def check_another_session_replaces_the_transcript(driver):
    """`tether session use` elsewhere: the page shows the chosen session's transcript, and
    its messages go there; back again, the first session's."""
    driver.get(BASE)
    session = lambda: driver.find_element(By.ID, "status-session").get_attribute("textContent")
    texts = lambda: [text for _, text in conversation(driver)]
    wait(lambda: any(text.startswith("You: stored before the page") for text in texts()), 20, "the stored message")
    wait(lambda: session() == "agent:main:main", 20, "the main session named in the status")
    said = use_session("side")
    wait(lambda: session().startswith("agent:main:side") and not any("stored before the page" in text for text in texts()), 20,
         "the side session's transcript shown")
    send(driver, "hello side")
    try:
        wait(lambda: any(": You said: hello side" in text and not text.startswith("You:") for text in texts()), 30, "the reply in the side session")
    except AssertionError as error:
        raise AssertionError(f"{error}: the page shows {texts()}") from None
    use_session("main")
    wait(lambda: any(text.startswith("You: stored before the page") for text in texts()) and not any("hello side" in text for text in texts()),
         20, "the main session's transcript back")
    return said


CHECKS = [check_strangers_are_refused, check_first_frame_without_websocket, check_focus_and_icon, check_send_delivered_and_reply_grows,
          check_banner_through_a_gateway_restart, check_web_restart_loses_nothing, check_keyboard_dark_scheme_and_zoom]


def main():
    failures = 0
    started = time.monotonic()
    checks = [check_another_session_replaces_the_transcript] if SESSIONS_ONLY else CHECKS
    driver = browser()
    try:
        driver.get(URL)  # trades the token for the cookie
        wait(lambda: driver.find_element(By.ID, "conversation"), 20, "the page")
        for check in checks:
            begun = time.monotonic()
            try:
                said = check(driver)
                print(f"ok {check.__name__} ({time.monotonic() - begun:.1f} s)" + (f": {said}" if said else ""), flush=True)
            except Exception as error:
                failures += 1
                shot = os.path.join(SHOTS, check.__name__ + ".png")
                try:
                    driver.save_screenshot(shot)
                except Exception:
                    shot = "(no screenshot)"
                print(f"FAILED {check.__name__}: {error}\n{traceback.format_exc()}screenshot: {shot}", flush=True)
    finally:
        driver.quit()
    print(f"browser checks: {len(checks) - failures} of {len(checks)} passed in {time.monotonic() - started:.1f} s", flush=True)
    return failures


if __name__ == "__main__":
    sys.exit(main())
