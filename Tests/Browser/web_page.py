"""The web page in a real browser: headless Chromium driven through WebDriver (selenium).

    python3 web_page.py URL_WITH_TOKEN RUN_DIR SCREENSHOT_DIR [sessions TETHER]

URL_WITH_TOKEN is what `tether web` prints; RUN_DIR the set's run directory (its
compose/state.json names the programs' pids, to kill them). With `sessions` and the path of
the tether command, only the OpenClaw checks run (a session switch, an approval, an image, a tool call, the slash commands and settings, /steer; a set speaking OpenClaw with TETHER_APPROVALS=on). Each check prints one line,
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
HOST = urllib.parse.urlparse(URL).netloc
TOKEN = urllib.parse.parse_qs(urllib.parse.urlparse(URL).query)["token"][0]


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
            f"the first frame lacks the stored message: {[text[:80] for text in texts]}"
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


MARKDOWN_REPLY = "\n".join([
    "Here is the plan:", "", "# Plan", "", "Some **bold**, *emphasis*, `code` and [the docs](https://example.com/docs).", "",
    "- first", "- second", "  - nested", "", "1. one", "2. two", "",
    "| name | size |", "|:-----|-----:|", "| a | 1 |", "| b | 22 |", "",
    "```python", "print('<b>hi</b>')", "```", "", "> quoted",
])
MARKDOWN_ATTACKS = "\n".join([
    "<script>window.pwned = 1</script> <img src=x onerror=\"window.pwned = 2\"> <b>bold?</b> <iframe src=\"https://example.com\"></iframe>",
    "[click](javascript:window.pwned=3) [also](JaVaScRiPt:window.pwned=4) [data](data:text/html,<script>1</script>) [rel](/s/other)",
    "![image](https://example.com/x.png) <a href=\"javascript:window.pwned=5\">raw</a> <https://example.com/auto>",
    "**__*nested _tricks*__** ***a*** [[inner](javascript:1)](https://example.com/outer) &lt;b&gt; &#106;avascript:1",
])


def send_lines(driver, text):
    """Sends a message of several lines: the composer takes Shift-Enter between them."""
    box = driver.find_element(By.ID, "message")
    box.clear()
    for number, line in enumerate(text.split("\n")):
        if number:
            box.send_keys(Keys.SHIFT, Keys.ENTER)
        box.send_keys(line)
    box.send_keys(Keys.ENTER)


def reply_item(driver, words):
    """The bot's reply whose text holds `words`, once it is whole (no longer streaming)."""
    return wait(lambda: [item for item in driver.find_elements(By.CSS_SELECTOR, "#conversation li.bot")
                         if words in item.text and not item.find_elements(By.CSS_SELECTOR, ".streaming")], 30, repr(words))[0]


def check_a_reply_in_markdown_is_drawn_and_nothing_in_it_runs(driver):
    """A bot's reply is drawn as Markdown: a heading, emphasis, code, a link that opens apart,
    lists, an aligned table, a code block with a copy button, a quote. HTML, javascript: and
    data: links, images and nesting tricks in a reply stay text: nothing runs, nothing loads."""
    driver.get(BASE)
    live(driver)
    send_lines(driver, MARKDOWN_REPLY)
    item = reply_item(driver, "quoted")
    markdown = item.find_element(By.CSS_SELECTOR, ".text.markdown")
    assert markdown.find_element(By.CSS_SELECTOR, "h3").text == "Plan", item.get_attribute("innerHTML")
    assert [node.text for node in markdown.find_elements(By.CSS_SELECTOR, "strong, em, .paragraph > code")] == ["bold", "emphasis", "code"]
    link = markdown.find_element(By.CSS_SELECTOR, "a")
    assert (link.get_attribute("href"), link.get_attribute("rel"), link.get_attribute("target"), link.text) == (
        "https://example.com/docs", "noopener noreferrer", "_blank", "the docs"), link.get_attribute("outerHTML")
    assert [node.text for node in markdown.find_elements(By.CSS_SELECTOR, "ul > li")][:2] == ["first", "second\nnested"]
    assert markdown.find_element(By.CSS_SELECTOR, "ul ul > li").text == "nested"
    assert [node.text for node in markdown.find_elements(By.CSS_SELECTOR, "ol > li")] == ["one", "two"]
    assert [node.text for node in markdown.find_elements(By.CSS_SELECTOR, "th")] == ["name", "size"]
    assert [node.text for node in markdown.find_elements(By.CSS_SELECTOR, "td")] == ["a", "1", "b", "22"]
    assert markdown.find_element(By.CSS_SELECTOR, "td:nth-child(2)").value_of_css_property("text-align") == "right"
    code = markdown.find_element(By.CSS_SELECTOR, "div.code pre code")
    assert code.text == "print('<b>hi</b>')" and code.get_attribute("class") == "language-python", code.get_attribute("outerHTML")
    assert markdown.find_element(By.CSS_SELECTOR, "blockquote").text == "quoted"
    if os.environ.get("TETHER_MARKDOWN_SHOT"):  # the picture in docs/WEB.md
        driver.execute_script("arguments[0].scrollIntoView()", item)
        driver.save_screenshot(os.environ["TETHER_MARKDOWN_SHOT"])
    copy = markdown.find_element(By.CSS_SELECTOR, "div.code button.copy")
    assert copy.get_attribute("aria-label") == "Copy the python code"
    copy.click()
    copied = wait(lambda: copy.text if copy.text != "Copy" else None, 5, "the copy button's answer")
    assert copied in ("Copied", "Selected: press Ctrl-C"), copied

    send_lines(driver, MARKDOWN_ATTACKS)
    item = reply_item(driver, "tricks")
    markdown = item.find_element(By.CSS_SELECTOR, ".text.markdown")
    assert driver.execute_script("return window.pwned") is None, "something in the reply ran"
    assert not markdown.find_elements(By.CSS_SELECTOR, "script, img, iframe, b, object, embed, svg"), markdown.get_attribute("innerHTML")
    hrefs = [node.get_attribute("href") for node in markdown.find_elements(By.CSS_SELECTOR, "a")]
    assert hrefs and all(href.startswith("https://") for href in hrefs), hrefs
    assert "https://example.com/x.png" in hrefs and "https://example.com/auto" in hrefs, hrefs
    text = item.text
    for shown in ["<script>window.pwned = 1</script>", "<b>bold?</b>", "<a href=\"javascript:window.pwned=5\">raw</a>", "&lt;b&gt;", "image: image"]:
        assert shown in text, f"{shown!r} not shown as text: {text!r}"
    for link_words in ["click", "also", "data", "rel"]:
        assert link_words in text and link_words not in [node.text for node in markdown.find_elements(By.CSS_SELECTOR, "a")], link_words
    # Garbled and hostile Markdown rendered in the page itself: nothing that runs or loads, no
    # link but http(s) and mailto, and no input that takes long (the slowest is reported).
    fuzz = driver.execute_script("""
        let seed = 7;
        const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
        const pieces = ['*', '**', '_', '__', '~~', '`', '```', '[', ']', '(', ')', '![', '<', '>', '> ', '- ', '1. ', '| ', '|---', '#', '\\n',
            '\\\\', 'javascript:alert(1)', 'https://example.com/', 'mailto:a@b.c', '<script>', '<img src=x onerror=alert(1)>', 'data:', 'a', ' ', 'word'];
        const inputs = [];
        for (let count = 0; count < 300; count++) {
            let text = '';
            const length = Math.floor(random() * 400);
            for (let index = 0; index < length; index++) text += pieces[Math.floor(random() * pieces.length)];
            inputs.push(text);
        }
        for (const unit of ['*a ', '_a ', '[a', '`a', '> ', '**a ', '~~a ', '[](', '<h', 'h']) inputs.push(unit.repeat(Math.floor(100000 / unit.length)));
        inputs.push(Array.from({length: 200}, (_, depth) => '  '.repeat(depth) + '- item').join('\\n'));
        let slowest = 0, problems = [];
        for (const input of inputs) {
            const start = performance.now();
            const holder = document.createElement('div');
            holder.append(TetherMarkdown.render(input));
            slowest = Math.max(slowest, performance.now() - start);
            if (holder.querySelector('script, img, iframe, object, embed, svg, style, link, form, input')) problems.push('an element: ' + input.slice(0, 80));
            for (const a of holder.querySelectorAll('a')) if (!/^(https?:|mailto:)/.test(a.href) || a.rel !== 'noopener noreferrer') problems.push('a link: ' + a.href);
        }
        return [inputs.length, Math.round(slowest), problems.slice(0, 5), window.pwned === undefined];""")
    count, slowest, problems, quiet = fuzz
    assert not problems and quiet, problems
    assert slowest < 5000, f"an input took {slowest} ms"
    return f"heading, emphasis, link, lists, table, code ({copied}), quote; {len(hrefs)} links in the attacks, all https; {count} garbled inputs inert, the slowest {slowest} ms"


def live(driver):
    """Waits until the page hears the bus through its WebSocket (the network comes only that way)."""
    wait(lambda: driver.find_element(By.ID, "status-network").get_attribute("textContent") != "unknown", 20, "the page live on the bus")


def web_attention():
    """The attention tether-web's presence says, as `tether status --json` lists it."""
    tether = os.path.join(os.path.dirname(os.readlink(f"/proc/{pid('web')}/exe")), "tether")
    status = subprocess.run([tether, "status", "--json", "--run-dir", RUN], capture_output=True, text=True, timeout=20)
    return [front.get("attention") for front in json.loads(status.stdout).get("frontEnds", []) if front["frontEnd"] == "tether-web"]


def check_a_message_tether_web_cannot_read_gets_words(driver):
    """Whatever a page sends over its WebSocket is answered: a message that is not JSON and a
    request tether-web does not know each get a problem in words, and the socket stays open."""
    driver.get(BASE)
    live(driver)
    answers = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const socket = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + pagePath + "/ws");
        const problems = [];
        socket.onmessage = (event) => {
          const message = JSON.parse(event.data);
          if (message.type !== "problem") return;
          problems.push(message.message);
          if (problems.length === 2) { socket.close(); done(problems); }
        };
        socket.onopen = () => {
          socket.send("not json");
          socket.send(JSON.stringify({type: "bogus", content: '"attention"'}));
        };
        socket.onclose = () => done(problems);
        setTimeout(() => done(problems), 10000);""")
    assert answers == ["tether-web could not read a message from the page", "tether-web does not know the request bogus"], answers
    send_and_await_delivery(driver, "sent after the unreadable ones")
    return "; ".join(answers)


def check_the_page_says_whether_it_is_looked_at(driver):
    """The page tells tether-web whether the person looks at it (visible and focused), and
    tether-web's presence says so on the bus, where tether-notify reads it. A browser says
    hidden of a tab in the background or a minimized window; the one headless window here is
    neither, so the page is told it is hidden as the browser tells it (visibilityState and
    its event)."""
    driver.get(BASE)
    live(driver)
    looked = "focused" if driver.execute_script("return document.visibilityState === 'visible' && document.hasFocus()") else "away"
    wait(lambda: web_attention() == [looked], 10, f"tether-web's attention {looked}")
    driver.execute_script(
        "Object.defineProperty(document, 'visibilityState', {value: 'hidden', configurable: true});"
        "document.dispatchEvent(new Event('visibilitychange'))")
    wait(lambda: web_attention() == ["away"], 10, "tether-web's attention away once the page is hidden")
    driver.execute_script("delete document.visibilityState; document.dispatchEvent(new Event('visibilitychange'))")
    wait(lambda: web_attention() == [looked], 10, f"tether-web's attention {looked} again")
    return f"{looked}, away while hidden, {looked} again"


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
    # Back from the composer, past the links and buttons of the conversation, to the status.
    for _ in range(60):
        driver.switch_to.active_element.send_keys(Keys.SHIFT, Keys.TAB)
        reached.append(focused())
        if reached[-1] == "summary:Status":
            break
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
    # The longest mark the page writes (a reply cut off, with the gateway's reason) must wrap too,
    # whether or not an earlier check left one in the conversation.
    driver.execute_script("""
        const mark = document.querySelector('.conversation .mark');
        if (mark) mark.textContent = '✗ cut off: the gateway lost the rest of the reply (it restarted while the reply was being written)';""")
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 500, "height": 400, "deviceScaleFactor": 2, "mobile": False})
    driver.execute_script("document.body.style.zoom = '200%'")
    sideways = driver.execute_script("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
    # What sticks out, when something does: the elements whose right edge is past the window's.
    wide = driver.execute_script("""
        const right = document.documentElement.clientWidth;
        return [...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right > right + 1)
            .slice(0, 5).map((e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className ? '.' + e.className : '')
                + ' ' + Math.round(e.getBoundingClientRect().right) + ': ' + (e.textContent || '').slice(0, 60))""") if sideways > 1 else []
    driver.execute_script("document.body.style.zoom = ''")
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    assert sideways <= 1, f"at 200% the page scrolls sideways by {sideways} px: {wide}"
    return f"Tab reaches {', '.join(dict.fromkeys(reached))}; dark background {dark}; no sideways scrolling at 200%"


def request(path, headers=None, method="GET"):
    """Sends a request as written on a new connection; answers its status and head."""
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


def page_path():
    """Where tether-web serves the page: the redirect that trades the token for the cookie."""
    status, head = request("/?token=" + TOKEN, {"Host": HOST})
    assert status == 303, f"the first URL: {status} {head}"
    location = [line.split(":", 1)[1].strip() for line in head.split("\r\n") if line.lower().startswith("location:")][0]
    assert location.startswith("/s/") and location.endswith("/"), location
    return location


PAGE = page_path()
BASE = f"http://{HOST}{PAGE}"


def check_strangers_are_refused(_driver):
    status, _ = request("/", {"Host": HOST})
    assert status == 401, f"no token: {status}"
    status, head = request("/?token=" + TOKEN, {"Host": HOST})
    cookies = [line for line in head.split("\r\n") if line.lower().startswith("set-cookie:")]
    assert status == 303 and any(f"Path={PAGE.rstrip('/')};" in line and "HttpOnly" in line and "SameSite=Strict" in line for line in cookies), \
        f"the first URL: {status} {head}"
    cookie = f"tether_web={TOKEN}"
    status, head = request(PAGE, {"Host": HOST, "Cookie": cookie})
    assert status == 200 and "content-security-policy: default-src 'none'" in head.lower(), f"with the cookie: {status} {head}"
    status, head = request(PAGE + "access", {"Host": HOST})
    assert status == 401, f"the page's files without the cookie: {status}"
    status, _ = request("/", {"Host": HOST, "Cookie": cookie})
    assert status == 401, f"outside the page's path with the cookie: {status}"
    status, _ = request(PAGE, {"Host": "evil.example:" + HOST.split(":")[1], "Cookie": cookie})
    assert status == 421, f"a wrong Host (DNS rebinding): {status}"
    upgrade = {"Host": HOST, "Cookie": cookie, "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
               "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
    refused, _ = request(PAGE + "ws", dict(upgrade, Origin="http://evil.example"))
    assert 400 <= refused < 500, f"a cross-site Origin on the WebSocket: {refused}"
    status, _ = request(PAGE + "ws", dict(upgrade, Origin="http://" + HOST))
    assert status == 101, f"the page's own Origin on the WebSocket: {status}"
    return f"no token 401, token URL 303 with an HttpOnly SameSite=Strict cookie for {PAGE}, wrong Host 421, cross-site Origin on the WebSocket {refused}"


def set_composer(driver, text):
    """Puts text in the composer as a paste does (typing megabytes key by key takes minutes)."""
    driver.execute_script("""
        const box = document.getElementById('message');
        box.value = arguments[0];
        box.dispatchEvent(new Event('input', {bubbles: true}));""", text)


def press_enter(driver):
    driver.execute_script("""
        document.getElementById('message').dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true, cancelable: true}));""")


def text_of(driver, element_id):
    return driver.find_element(By.ID, element_id).get_attribute("textContent")


def delivered(driver, text, timeout=30):
    """Waits until a message of one's own starting with `text` is marked delivered; answers its id."""
    found = wait(lambda: [item for item in conversation(driver) if item[1].startswith("You: " + text) and "delivered" in item[1]], timeout,
                 f"{text[:40]!r} delivered")
    return found[0][0]


def send_and_await_delivery(driver, text):
    send(driver, text)
    return delivered(driver, text)


def follow_banner(driver):
    driver.execute_script("""
        window.bannerHistory = [];
        const words = document.getElementById('banner-words');
        new MutationObserver(() => window.bannerHistory.push(words.textContent)).observe(words, {childList: true, characterData: true, subtree: true});""")


def tether_web_banners(driver):
    return [words for words in driver.execute_script("return window.bannerHistory") if "tether-web" in words]


def check_oversized_messages_are_refused_in_words(driver):
    """2 MiB typed: refused in the composer, in words, and kept there; a 1 MiB draft: not
    saved, said so; 300 KiB: delivered. The page stays connected throughout, then sends."""
    driver.get(BASE)
    live(driver)
    follow_banner(driver)
    before = len(conversation(driver))
    set_composer(driver, "x" * (2 << 20))
    press_enter(driver)
    refused = wait(lambda: "Not sent" in text_of(driver, "notice") and text_of(driver, "notice"), 10, "the 2 MiB message refused in words")
    assert "2.0 MiB" in refused, refused
    assert len(conversation(driver)) == before, "the refused message was added to the conversation"
    assert driver.execute_script("return document.getElementById('message').value.length") == 2 << 20, "the refused message left the composer"
    note = wait(lambda: "not sent and not saved" in text_of(driver, "size-note") and text_of(driver, "size-note"), 10,
                "the composer's note on the 2 MiB message")
    set_composer(driver, "d" * ((1 << 20) + 1))
    time.sleep(1.5)  # past the draft's saving pause: nothing over the limit may leave the page
    note = text_of(driver, "size-note")
    assert "1.0 MiB" in note and "not saved" in note, f"the 1 MiB draft's note: {note!r}"
    set_composer(driver, "y" * (300 << 10))
    press_enter(driver)
    delivered(driver, "yyyy", 60)
    wait(lambda: text_of(driver, "size-note") == "", 10, "the note gone once the composer emptied")
    send_and_await_delivery(driver, "small after the large ones")
    assert not tether_web_banners(driver), f"the page lost tether-web: {tether_web_banners(driver)}"
    return f"2 MiB refused: {refused!r}; 1 MiB draft: {note!r}; 300 KiB delivered; then a small message"


def failed_marks(driver, start):
    """The marks of the failed messages of one's own whose text starts with `start`, read in the
    page (the conversation's whole text is megabytes)."""
    return driver.execute_script("""
        return [...document.querySelectorAll('#conversation li.user')].filter((li) => li.querySelector('.text').textContent.startsWith(arguments[0]))
            .map((li) => li.querySelector('.mark').textContent).filter((mark) => mark.includes('failed'))""", start)


def check_a_frame_too_large_for_tether_web_fails_its_message(driver):
    """A page that believes in larger limits (an older page) sends 2 MiB of text: tether-web
    reads it (a message with images may be 32 MiB) and protod refuses it in words; then 40 MiB,
    more than tether-web reads: tether-web closes the socket (1009). The page marks each
    message failed, forgets it, and sends again."""
    driver.get(BASE)
    live(driver)
    driver.execute_script("limits = Object.assign({}, limits, {messageBytes: 1e9, draftBytes: 1e9});")
    set_composer(driver, "o" * (2 << 20))
    press_enter(driver)
    # A deadline, not a measure: a loaded machine takes a while to move 2 MiB through the page, tether-web and protod.
    refused = wait(lambda: failed_marks(driver, "oooo"), 120, "the 2 MiB message failed")
    assert "a message's text is at most 983,038 bytes" in text_of(driver, "notice"), text_of(driver, "notice")
    # Made in the page: 40 MiB through WebDriver would take minutes.
    driver.execute_script("""
        const box = document.getElementById('message');
        box.value = 'w'.repeat(40 << 20);
        box.dispatchEvent(new Event('input', {bubbles: true}));""")
    press_enter(driver)
    failed = wait(lambda: failed_marks(driver, "wwww"), 90, "the 40 MiB message failed")
    kept = driver.execute_script("return JSON.parse(localStorage.getItem('tether-pending') || '[]').map((m) => m.content.length)")
    assert all(length < 1000 for length in kept), f"the failed messages are still kept: {kept}"
    assert "too large for tether-web (40.0 MiB)" in text_of(driver, "notice"), text_of(driver, "notice")
    send_and_await_delivery(driver, "small after the frame too large")
    return f"2 MiB of text refused by protod, marked {refused[0]!r}; 40 MiB closed by tether-web, marked {failed[0]!r}; then a small message delivered"


def check_what_the_browser_kept_cannot_stop_the_page(driver):
    """What an older page left in the browser's storage (a 2 MiB message, malformed entries)
    is refused in words when the page opens again in a new tab; what fits is delivered."""
    driver.get(BASE)
    live(driver)
    driver.execute_script("""localStorage.setItem('tether-pending', JSON.stringify(
        [{id: 'kept-huge', content: 'z'.repeat(2 << 20)}, {id: 5}, 'junk', null, {id: 'kept-small', content: 'kept from before'}]));""")
    old = driver.current_window_handle
    driver.switch_to.new_window("tab")
    new = driver.current_window_handle
    driver.switch_to.window(old)
    driver.close()
    driver.switch_to.window(new)
    driver.get(BASE)
    wait(lambda: [text for identifier, text in conversation(driver) if identifier == "kept-huge" and "failed" in text], 20, "the kept 2 MiB message failed")
    delivered(driver, "kept from before")
    kept = driver.execute_script("return localStorage.getItem('tether-pending')")
    assert "kept-huge" not in kept, "the 2 MiB message is still kept"
    send_and_await_delivery(driver, "small after reopening")
    return "2 MiB kept message failed in words and forgotten; malformed entries ignored; the kept small one delivered"


def another_program():
    """A program listening on another port of 127.0.0.1, recording the cookies it is sent."""
    import http.server
    import threading

    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append((self.path, self.headers.get_all("Cookie") or []))
            body = b"<!doctype html><title>another program</title><p>another program of this host</p>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def check_a_page_tether_web_refuses_says_so(driver):
    """A page whose browser lost both its cookie and its key: when its WebSocket closes (here:
    tether-web restarted) the banner says tether-web refuses it and what to do, not
    "Reconnecting…" for ever; the URL `tether web` prints lets it in again."""
    driver.get(BASE)
    live(driver)
    driver.execute_cdp_cmd("Network.clearBrowserCookies", {})
    driver.execute_script("delete document.documentElement.dataset.pageKey; localStorage.removeItem('tether-page-key');")
    kill_and_await_restart("web")
    words = wait(lambda: "refuses" in text_of(driver, "banner-words") and text_of(driver, "banner-words"), 30, "the banner saying tether-web refuses the page")
    assert "tether web" in words and "Reconnecting" not in words, words
    driver.get(URL)
    live(driver)
    send_and_await_delivery(driver, "sent after logging in again")
    return f"banner: {words!r}; in again through the printed URL"


def check_another_port_gets_nothing(driver):
    """A page served from another port of 127.0.0.1 is sent no key, cannot use tether-web,
    and cannot lock tether-web's page out with cookies of its own."""
    server, seen = another_program()
    other = f"http://127.0.0.1:{server.server_port}"
    try:
        driver.get(BASE)
        live(driver)
        driver.get(other + "/")
        tried = driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            const web = arguments[0], page = arguments[1], other = arguments[2];
            const result = {};
            // Cookies of the same name, for the whole host and for paths the page could be under.
            for (const path of ['/', '/s', '/s/']) document.cookie = 'tether_web=forged; path=' + path;
            result.visible = document.cookie;
            const opens = (url) => new Promise((resolve) => {
                const socket = new WebSocket(url);
                socket.onopen = () => { socket.close(); resolve(true); };
                socket.onerror = () => resolve(false);
            });
            const status = (url) => fetch(url, {credentials: 'include'}).then((answer) => answer.status, () => 'refused');
            (async () => {
                result.socketAtRoot = await opens('ws://' + web + '/ws');
                // Even knowing the page's path, which it cannot.
                result.socketAtPage = await opens('ws://' + web + page + 'ws');
                result.fetchPage = await status('http://' + web + page + 'access');
                // Its own server, asked under the paths a key could be scoped to.
                for (const path of ['/', '/s/', '/s/x/', '/ws']) await fetch(other + path, {credentials: 'include'});
                done(result);
            })();""", HOST, PAGE, other)
        assert tried["socketAtRoot"] is False and tried["socketAtPage"] is False, f"another port opened tether-web's WebSocket: {tried}"
        assert tried["fetchPage"] == "refused", f"another port read tether-web: {tried}"
        assert TOKEN not in tried["visible"], "another port's page reads the key"
        leaked = [(path, cookies) for path, cookies in seen if any(TOKEN in cookie for cookie in cookies)]
        assert not leaked, f"another port was sent the key: {leaked}"
        assert seen, "the other program was never asked for anything"
        driver.get(BASE)
        live(driver)
        send_and_await_delivery(driver, "sent after another port tried")
        # Cookies enough to push tether-web's out of the browser's jar (it keeps about 150 for a host).
        driver.get(other + "/")
        driver.execute_script("for (let i = 0; i < 400; i++) document.cookie = 'flood' + i + '=' + 'x'.repeat(100) + '; path=/';")
        # A page's cookies reach the browser's cookie jar a moment later: the flood is over when the jar stops changing.
        jar = lambda: sorted(cookie["name"] for cookie in driver.get_cookies())
        settled = [None]
        def unchanged():
            now = jar()
            same = now == settled[0]
            settled[0] = now
            time.sleep(0.3)
            return same
        wait(unchanged, 20, "the cookie jar settled")
        gone = not any(cookie["name"] == "tether_web" and cookie["value"] == TOKEN for cookie in driver.get_cookies())
        driver.get(BASE)
        live(driver)
        send_and_await_delivery(driver, "sent after another port's cookie flood")
        return (f"no key in {len(seen)} requests to port {server.server_port}; its WebSocket and fetch refused; "
                f"its cookie flood {'pushed the key out, and the page got it back' if gone else 'left the key'}; tether-web's page still sends")
    finally:
        server.shutdown()


def check_screen_reader_hears_each_message_once(driver):
    """A message sent and answered adds its own item and its reply's, changed in place as the
    reply grows; the announcer says the reply once, whole."""
    driver.get(BASE)
    live(driver)
    conversation_region = driver.execute_script("return document.getElementById('conversation').getAttribute('aria-live')")
    assert conversation_region is None, "the conversation list is a live region: every change would be read"
    driver.execute_script("""
        window.added = [];
        new MutationObserver((records) => { for (const record of records) for (const node of record.addedNodes) window.added.push(node.nodeName); })
            .observe(document.querySelector('main'), {childList: true, subtree: true});
        window.announced = [];
        const announcer = document.getElementById('announcer');
        new MutationObserver(() => window.announced.push(announcer.textContent))
            .observe(announcer, {childList: true, characterData: true, subtree: true});""")
    send(driver, "heard once")
    message_id = delivered(driver, "heard once")
    wait(lambda: any(text.endswith("You said: heard once") for text in replies_to(driver, message_id)), 30, "the whole reply")
    wait(lambda: driver.execute_script("return window.announced.length") > 0, 10, "the reply announced")
    time.sleep(0.5)
    added = driver.execute_script("return window.added")
    announced = [words for words in driver.execute_script("return window.announced") if "heard once" in words]
    assert len(added) <= 3, f"{len(added)} nodes added for one message sent and answered: {added}"
    assert len(announced) == 1 and announced[0].startswith("Opta says: You said: heard once"), f"announced: {announced}"
    return f"{len(added)} nodes added ({', '.join(added)}); announced once: {announced[0]!r}"


def use_session(key):
    done = subprocess.run([TETHER, "session", "use", key, "--run-dir", RUN], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, f"tether session use {key}: {done.returncode} {done.stderr}"
    return done.stdout.strip()


def compose(*arguments):
    """`tether-compose ARGUMENTS` against the set, from beside the running tether-web."""
    program = os.path.join(os.path.dirname(os.readlink(f"/proc/{pid('web')}/exe")), "tether-compose")
    return subprocess.run([program, *arguments, "--run-dir", RUN], capture_output=True, text=True, timeout=90)


def check_a_program_held_back_as_misconfigured_is_named_until_fixed(driver):
    """connd's token file made readable by others, connd restarted: the supervisor holds it
    back, and the page names it with the fix until the file is fixed and connd restarted."""
    driver.get(BASE)
    live(driver)
    token = os.path.join(RUN, "gateway.token")
    held = lambda: driver.find_element(By.ID, "held-back")
    os.chmod(token, 0o644)
    try:
        restart = compose("restart", "connd", "--timeout", "30")
        assert restart.returncode == 78, f"restart with the token file at 644: {restart.returncode} {restart.stderr}"
        words = wait(lambda: held().is_displayed() and held().text, 20, "the program held back named on the page")
        assert "connd cannot run as configured: token file" in words and "run chmod 600" in words, words
    finally:
        os.chmod(token, 0o600)
    fixed = compose("restart", "connd", "--timeout", "30")
    assert fixed.returncode == 0, f"restart once fixed: {fixed.returncode} {fixed.stderr}"
    wait(lambda: not held().is_displayed(), 20, "the notice gone once connd runs")
    return words


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


def check_an_approval_is_answered_on_the_page(driver):
    """OpenClaw's agent asks to run a command: the page shows the approval with a button for
    each decision it allows, says it once in a live region, and a click answers it."""
    driver.get(BASE)
    live(driver)
    send(driver, "exec: make deploy")
    region = driver.find_element(By.ID, "approvals")
    wait(lambda: region.is_displayed() and "make deploy" in region.text, 30, "the approval shown")
    buttons = region.find_elements(By.CSS_SELECTOR, "button")
    assert [button.text for button in buttons] == ["Allow once", "Allow always", "Deny"], [button.text for button in buttons]
    assert all("make deploy" in (button.get_attribute("aria-label") or "") for button in buttons), "the buttons do not say what they answer"
    wait(lambda: "make deploy" in text_of(driver, "approval-news"), 10, "the approval announced")
    buttons[0].click()
    wait(lambda: any(text.endswith("Ran make deploy (allowed once): done.") for _, text in conversation(driver)), 30, "the reply after the approval")
    assert "make deploy" in [code.text for code in driver.find_elements(By.CSS_SELECTOR, "#conversation li.bot .markdown code")], "the reply's code span"
    wait(lambda: not region.is_displayed(), 10, "the approval gone from the page")
    news = text_of(driver, "approval-news")
    assert "allowed once" in news, news
    return f"shown with {len(buttons)} decisions; answered with a click; {news!r}"


def check_an_image_is_attached_with_the_picker_and_a_non_image_is_refused(driver):
    """OpenClaw: "Attach image" takes a PNG (told by its bytes), lists it above the composer and
    sends it with the next message once; a text file named .png is refused in words, and a
    file over 5,000,000 bytes too, before anything is sent."""
    driver.get(BASE)
    live(driver)
    picture, notes, large = (os.path.join(RUN, name) for name in ("picture.png", "notes.png", "large.png"))
    with open(picture, "wb") as file:
        file.write(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 7 + bytes(200))
    with open(notes, "wb") as file:
        file.write(b"only words here")
    with open(large, "wb") as file:
        file.write(b"\x89PNG\r\n\x1a\n" + bytes(6_000_000))
    picker = driver.find_element(By.ID, "attach-file")
    # The picker's dialog is the browser's own: the file is handed to its input, as a person's choice is.
    driver.execute_script("arguments[0].hidden = false", picker)
    picker.send_keys(notes)
    wait(lambda: "notes.png is not an image Tether can send" in text_of(driver, "notice"), 10, "the text file refused")
    picker.send_keys(large)
    wait(lambda: "large.png is 6,000,008 bytes; the gateway takes images of at most 5,000,000 bytes" in text_of(driver, "notice"), 10,
         "the large file refused")
    listed = driver.find_element(By.ID, "attachments")
    assert not listed.is_displayed(), "a refused file was listed"
    picker.send_keys(picture)
    wait(lambda: "picture.png (image/png, 2,000 bytes)" in listed.text, 10, "the picture listed")
    assert "Remove" in listed.text, listed.text
    driver.execute_script("arguments[0].hidden = true", picker)
    set_composer(driver, "what is this picture?")
    press_enter(driver)
    reply = wait(lambda: [text for _, text in conversation(driver) if "You sent 1 image (image/png, 2,000 bytes)" in text], 30, "the bot's reply")
    mine = [text for _, text in conversation(driver) if text.startswith("You: what is this picture?")]
    assert mine and "[image: picture.png (image/png, 2,000 bytes)]" in mine[0], mine
    assert not listed.is_displayed(), "the picture stayed attached after it was sent"

    # Phone photos: two of 5,000,000 bytes go in one message; a third and a fourth fit the bus,
    # but not OpenClaw's 25 MiB frame with them, and the fourth is refused in protod's words.
    photos = [os.path.join(RUN, f"photo{index}.png") for index in range(4)]
    for index, path in enumerate(photos):
        with open(path, "wb") as file:
            file.write(b"\x89PNG\r\n\x1a\n" + bytes([index]) * (5_000_000 - 8))
    driver.execute_script("arguments[0].hidden = false", picker)
    for path in photos[:2]:
        picker.send_keys(path)
    wait(lambda: "photo1.png (image/png, 5,000,000 bytes)" in listed.text, 30, "two photos listed")
    started = time.monotonic()
    set_composer(driver, "two photos")
    press_enter(driver)
    both = "You sent 2 images (image/png, 5,000,000 bytes; image/png, 5,000,000 bytes)"
    wait(lambda: [text for _, text in conversation(driver) if both in text], 90, "the bot's reply to two photos")
    took = time.monotonic() - started
    for path in photos:
        picker.send_keys(path)
    refused = wait(lambda: "Not attached: the message's frame would be about" in text_of(driver, "notice") and text_of(driver, "notice"), 30,
                   "the fourth photo refused")
    assert "the gateway reads frames of at most 26,214,400 bytes: send fewer or smaller images" in refused, refused
    assert "photo2.png (image/png, 5,000,000 bytes)" in listed.text and "photo3.png" not in listed.text, listed.text
    driver.execute_script("arguments[0].hidden = true", picker)
    while listed.find_elements(By.TAG_NAME, "button"):
        listed.find_elements(By.TAG_NAME, "button")[0].click()
    return f"a text file and 6 MB refused in words; sent {mine[0]!r}; the bot: {reply[0]!r}; two 5,000,000-byte photos answered in {took:.1f} s; the fourth refused: {refused!r}"


def check_a_tool_call_is_one_line_with_its_output_and_thinking_collapsed(driver):
    """The agent calls a tool: one item `⚙ read README.md · ok · 0.3 s`; its output (from the
    gateway's history) in a collapsed <details>, and the model's thinking in another, set as
    text; opening them shows the words."""
    driver.get(BASE)
    live(driver)
    send(driver, "tool: read <b>README</b>.md")
    # The read call's item (an approval's exec call may be listed before it).
    reads = lambda: [item for item in driver.find_elements(By.CSS_SELECTOR, "#conversation li.tool")
                     if item.find_elements(By.CSS_SELECTOR, "details.output") and item.find_element(By.CSS_SELECTOR, ".text").text.startswith("read ")]
    tool = wait(reads, 30, "the tool call with its output")[0]
    line = tool.find_element(By.CSS_SELECTOR, ".text").text
    assert line.startswith("read <b>README</b>.md · ok · 0.") and line.endswith(" s"), line
    assert not tool.find_elements(By.CSS_SELECTOR, "b"), "a tool's arguments were read as HTML"
    output = tool.find_element(By.CSS_SELECTOR, "details.output")
    thinking = wait(lambda: tool.find_element(By.CSS_SELECTOR, "details.thinking"), 10, "the thinking")
    assert output.get_attribute("open") is None and thinking.get_attribute("open") is None, "shown open"
    assert not output.find_element(By.CSS_SELECTOR, "pre").is_displayed(), "the output is not collapsed"
    output.find_element(By.CSS_SELECTOR, "summary").click()
    text = output.find_element(By.CSS_SELECTOR, "pre").text
    assert text == "line 1 of <b>README</b>.md\nline 2 of <b>README</b>.md\nline 3 of <b>README</b>.md", text
    thinking.find_element(By.CSS_SELECTOR, "summary").click()
    words = thinking.find_element(By.CSS_SELECTOR, "div").text
    assert "I will call the read tool" in words, words
    reply = [text for _, text in conversation(driver) if "I ran read on" in text]
    assert len(reply) == 1, conversation(driver)
    return f"{line!r}; output {len(text.splitlines())} lines; thinking {words!r}"


def check_slash_commands_change_and_show_the_settings(driver):
    """Tether's own /commands on the page: /help lists them, /think changes the level through
    the gateway (whose answer comes in the conversation), /status opens the status view with
    the model and the tokens, a level OpenClaw does not read is refused in words, and a
    /command the gateway knows is sent as typed."""
    driver.get(BASE)
    live(driver)
    send(driver, "/help")
    output = driver.find_element(By.ID, "command-output")
    wait(lambda: output.is_displayed() and "/think LEVEL" in output.text and "sent to the gateway as text" in output.text, 20, "/help's list")
    send(driver, "/think high")
    wait(lambda: "sent /think high" in text_of(driver, "notice"), 20, "the change said")
    wait(lambda: any(text.endswith("Thinking level set to high.") for _, text in conversation(driver)), 30, "the gateway's answer")
    model = lambda: driver.find_element(By.ID, "status-model").get_attribute("textContent")
    usage = lambda: driver.find_element(By.ID, "status-usage").get_attribute("textContent")
    wait(lambda: "thinking high" in model(), 20, "the level in the status view")
    send(driver, "/status")
    wait(lambda: driver.find_element(By.CSS_SELECTOR, "details.status").get_attribute("open") is not None, 10, "the status view opened")
    wait(lambda: "tokens" in usage(), 20, "the usage in the status view")
    send(driver, "/think extreme")
    wait(lambda: "extreme is no thinking level" in text_of(driver, "notice"), 20, "the refusal said")
    send(driver, "/compact")
    wait(lambda: any(text.endswith("You said: /compact") for _, text in conversation(driver)), 30, "/compact sent to the gateway")
    send(driver, "/search compact")
    wait(lambda: "Found in the stored conversation" in output.text and "You said: /compact" in output.text, 20, "/search's hits")
    # A hit chosen shows the message in its conversation: marked, with the reply after it.
    sent = [button for button in output.find_elements(By.CSS_SELECTOR, "button.hit") if button.text.endswith("You: /compact")]
    assert len(sent) == 1, [button.text for button in output.find_elements(By.CSS_SELECTOR, "button.hit")]
    sent[0].click()
    wait(lambda: "The message found in its conversation" in output.text, 20, "the hit in its conversation")
    lines = [item.text for item in output.find_elements(By.CSS_SELECTOR, "li")]
    focus = output.find_elements(By.CSS_SELECTOR, "li.focus[aria-current=true]")
    assert len(focus) == 1 and focus[0].text.startswith("▶ ") and focus[0].text.endswith("You: /compact"), lines
    after = lines[lines.index(focus[0].text) + 1:]
    assert after and after[0].endswith("You said: /compact"), lines
    assert not output.find_elements(By.CSS_SELECTOR, "button.hit"), "the conversation's lines are not hits"
    return f"model {model()!r}, usage {usage()!r}; the hit in its conversation: {len(lines)} lines"


def gateway_faults(faults, method="POST"):
    """Sets (or with DELETE clears) the development gateway's faults through its admin endpoint."""
    with open(os.path.join(RUN, "gateway.token")) as file:
        token = file.read().strip()
    port = os.environ["TETHER_GATEWAY_PORT"]
    data = faults.encode() if method == "POST" else None
    request = urllib.request.Request(f"http://127.0.0.1:{port}/admin/faults", data=data, method=method,
                                     headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200, f"faults {faults}: HTTP {answer.status}"


def check_slash_steer_goes_into_the_reply_in_progress(driver):
    """/steer TEXT while a reply streams, on today's gateway: the message is marked with where
    it went, and the reply in progress answers it too."""
    driver.get(BASE)
    live(driver)
    words = " ".join(f"w{n}" for n in range(1, 41))
    gateway_faults('{"frameDelayMilliseconds": 100}')
    try:
        send(driver, words)
        wait(lambda: any(text.startswith("Bot: You said: w1") or ": You said: w1 " in text for _, text in conversation(driver)), 30,
             "the long reply streaming")
        send(driver, "/steer also this")
        mark = wait(lambda: [text for _, text in conversation(driver) if text.startswith("You: also this") and "steered into the reply in progress" in text],
                    60, "the steered message marked")
        wait(lambda: any("And to what you added: You said: also this" in text for _, text in conversation(driver)), 60,
             "the reply answering both")
    finally:
        gateway_faults("{}", method="DELETE")
    replies = [text for _, text in conversation(driver) if "You said: also this" in text and not text.startswith("You:")]
    assert len(replies) == 1, f"one reply answers both: {replies}"
    return mark[0]


CHECKS = [check_strangers_are_refused, check_first_frame_without_websocket, check_focus_and_icon, check_the_page_says_whether_it_is_looked_at,
          check_a_message_tether_web_cannot_read_gets_words,
          check_send_delivered_and_reply_grows,
          check_screen_reader_hears_each_message_once, check_another_port_gets_nothing, check_oversized_messages_are_refused_in_words,
          check_a_frame_too_large_for_tether_web_fails_its_message, check_what_the_browser_kept_cannot_stop_the_page,
          check_a_page_tether_web_refuses_says_so,
          check_banner_through_a_gateway_restart, check_web_restart_loses_nothing, check_a_reply_in_markdown_is_drawn_and_nothing_in_it_runs,
          check_keyboard_dark_scheme_and_zoom, check_a_program_held_back_as_misconfigured_is_named_until_fixed]


def main():
    failures = 0
    started = time.monotonic()
    checks = [check_another_session_replaces_the_transcript, check_an_approval_is_answered_on_the_page,
              check_an_image_is_attached_with_the_picker_and_a_non_image_is_refused,
              check_a_tool_call_is_one_line_with_its_output_and_thinking_collapsed,
              check_slash_commands_change_and_show_the_settings, check_slash_steer_goes_into_the_reply_in_progress] if SESSIONS_ONLY else CHECKS
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
                try:
                    console = [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
                except Exception:
                    console = []
                print(f"FAILED {check.__name__}: {error}\n{traceback.format_exc()}screenshot: {shot}\nthe page's errors: {console[-10:]}", flush=True)
    finally:
        driver.quit()
    print(f"browser checks: {len(checks) - failures} of {len(checks)} passed in {time.monotonic() - started:.1f} s", flush=True)
    return failures


if __name__ == "__main__":
    sys.exit(main())
