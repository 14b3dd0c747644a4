"""Accessibility of every page state an operator meets (issue 33 item 7), in a real browser with axe-core: no
serious and no critical WCAG 2 A/AA violation with alerts present (fleet, session page, alerts page), local
summaries (session page, inspector), stuck sessions, an injected fault blamed for a failure, refusals (409 / 400
notices), import errors, the policy form, gateway pages, login and error pages; and the keyboard: skip links first,
the fleet's first run control a few Tabs from the top. A server of its own, seeded with those states
(COMPACTWEB_SEED_A11Y), so the other browser tests keep their quiet board. Each test saves a screenshot."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import serving
from tests.browser.test_operator_finish import axe_violations, checked_page

BAD_ROLLOUT = Path(__file__).resolve().parents[1] / "fixtures" / "rollouts" / "malformed_bad_json.jsonl"
BLOCKING = ("serious", "critical")
LIVE_TIMEOUT = 30_000


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("browser-a11y-var"), COMPACTWEB_SEED_A11Y="1") as server:
        yield server


def blocking(page: Page) -> list:
    """The serious and critical violations of the page as it is now (id, impact, first nodes)."""
    return [v for v in axe_violations(page) if v["impact"] in BLOCKING]


# Every state is checked as the three stories see it (issue 47): a laptop in the light scheme, the same in the
# browser's dark scheme (the stylesheet follows prefers-color-scheme), and a phone (390 x 844) in the dark scheme.
MODES = {
    "light": ({"width": 1280, "height": 800}, "light"),
    "dark": ({"width": 1280, "height": 800}, "dark"),
    "phone-dark": ({"width": 390, "height": 844}, "dark"),
}


@pytest.fixture(scope="module")
def signed_in(browser, web):
    """signed_in(role) → the cookies of one login through the form as `role` (Playwright's storage state), made
    once per module. The sweep's pages open in contexts of their own, each in its mode, already signed in: the
    login page and the fleet board it redirects to are not loaded again for every state and mode (two of the
    three page loads of each check, issue 43). The login form itself is checked below, in every mode."""
    states: dict[str, dict] = {}

    def state(role: str) -> dict:
        if role not in states:
            page = checked_page(browser, web, role)
            states[role] = page.context.storage_state()
            page.context.close()
        return states[role]

    return state


def signed_in_page(browser, web, signed_in, role: str | None, *, viewport: dict | None = None,
                   color_scheme: str = "light") -> Page:
    """A page like checked_page's (a context of its own that may inject axe-core; 1280 x 800, light, unless told),
    signed in as `role` with the module's one login (None: signed out)."""
    if role is None:
        return checked_page(browser, web, None, viewport=viewport, color_scheme=color_scheme)
    context = browser.new_context(viewport=viewport or {"width": 1280, "height": 800}, bypass_csp=True,
                                  color_scheme=color_scheme, storage_state=signed_in(role))
    return context.new_page()


def mode_page(browser, web, signed_in, role: str | None, mode: str) -> Page:
    """signed_in_page with the mode's viewport and colour scheme."""
    viewport, scheme = MODES[mode]
    return signed_in_page(browser, web, signed_in, role, viewport=viewport, color_scheme=scheme)


# What a reader sees written as the pages write it (issue 47 item 7): every count of four or more digits with
# thousands separators, and no code (snake_case, job.running) where a label belongs. Read from the rendered text:
# not hidden, not folded away, and not the session's own content (its items, quoted facts, code, the chart's
# hover titles, a session's title as its author wrote it), which is shown as it was written. Positions and ids
# (#1234, seq, dates, ports, versions) are written as they are.
UNWRITTEN = """(codes) => {
    const content = 'script, style, pre, code, kbd, samp, textarea, svg, .item, .preview, .summary-text, '
                  + '.forgotten, .ident, #id_password, a[href^="/sessions/"], #session-head h1';
    const numbers = new Set(), found = new Set();
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const parent = node.parentElement;
        if (!parent || parent.closest(content) || !parent.checkVisibility({visibilityProperty: true})) continue;
        if (parent.closest('details:not([open])') && !parent.closest('summary')) continue;
        const text = node.textContent;
        for (const m of text.matchAll(/(?<![\\w.:\\/#-])\\d{4,}(?![\\w:.-]|,\\d)/g)) {
            if (!/^(19|20)\\d\\d$/.test(m[0])) numbers.add(text.trim().slice(0, 120));  // a year alone is a year
        }
        if (!codes) continue;
        // (not inside a path or a file name: malformed_bad_json.jsonl is the file's name)
        const code = /(?<![\\w.\\/-])(?:[a-z][a-z0-9]*(?:_[a-z0-9]+)+|(?:job|compaction)\\.[a-z_]+)(?![\\w\\/-]|\\.\\w)/g;
        for (const m of text.matchAll(code)) {
            if (!TOKENIZERS.includes(m[0])) found.add(m[0] + ' in: ' + text.trim().slice(0, 120));
        }
    }
    return {numbers: [...numbers], codes: [...found]};
}""".replace("TOKENIZERS", '["o200k_base", "cl100k_base"]')  # an encoding's own name, as tiktoken spells it


def unwritten(page: Page, *, codes: bool = True) -> dict:
    """The texts on the page with a count of 4+ digits without separators, and the codes shown (`codes=False`: the
    admin's help texts name Codex's settings by their keys, on purpose)."""
    return page.evaluate(UNWRITTEN, codes)


def check(page: Page, screenshot_dir: Path, name: str, *, codes: bool = True) -> None:
    page.screenshot(path=str(screenshot_dir / f"a11y-{name}.png"), full_page=True)
    found = blocking(page)
    assert found == [], f"{name}: {found}"
    seen = unwritten(page, codes=codes)
    assert seen == {"numbers": [], "codes": []}, f"{name}: {seen}"


STATES = {
    "fleet-with-alerts-and-stuck": "/",
    "session-with-alerts-and-local-summary": "/sessions/{summarised_session}/",
    "session-stuck-with-fault": "/sessions/{stuck_seeded}/",
    "inspector-local-summary": "/compactions/{local_compaction}/",
    "rollback-confirm": "/compactions/{local_compaction}/rollback/",
    "replay-compare": "/sessions/{summarised_session}/replays/",
    "alerts-page": "/alerts/",
    "analytics": "/analytics/",
    "audit-log": "/audit/",
    "import": "/import/",
    "not-found": "/nowhere/",
    # issue 47: the long inspector, the session kinds that are not simulated, the pages that set the gateway up
    "inspector-long-history": "/compactions/{long_compaction}/",
    "claude-session": "/sessions/{claude_session}/",
    "claude-inspector": "/compactions/{claude_compaction}/",
    "claude-replay": "/sessions/{claude_session}/replays/",  # its provider's long derived name in a select
    "gateway-session": "/sessions/{gateway_session}/",
    "gateway-session-not-steerable": "/sessions/{unsteerable_gateway_session}/",  # its card's note
    "running-session": "/sessions/{kept_running}/",
    "gateway-keys": "/gateway-keys/",
    "api-tokens": "/api-tokens/",
}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("name", list(STATES))
def test_each_seeded_page_state_has_no_serious_or_critical_violation(browser, web, signed_in, screenshot_dir, name,
                                                                   mode):
    page = mode_page(browser, web, signed_in, "admin", mode)
    page.goto(web.url + STATES[name].format(**web.seed["a11y"]))
    page.wait_for_load_state()
    assert "/login/" not in page.url, f"{name}: not signed in, the login page would be checked instead"
    if name == "fleet-with-alerts-and-stuck":
        expect(page.locator("#fleet-alerts")).to_contain_text("failure streak")
        expect(page.locator(".flag--stuck").first).to_be_visible()
    if name == "session-stuck-with-fault":
        expect(page.locator("#fault-active")).to_contain_text("Server error")
    if name == "session-with-alerts-and-local-summary":
        expect(page.locator("#compaction-status")).to_be_visible()
    if name == "gateway-session":  # no Compact-now form: the note sends the operator to the gateway card
        expect(page.locator("#compact-via-gateway")).to_be_visible()
        expect(page.locator("#compact-form")).to_have_count(0)
    if name == "gateway-session-not-steerable":
        expect(page.locator("#gateway-not-steerable")).to_be_visible()
    if name == "gateway-keys":  # a route for Claude Code, its set-up open
        expect(page.locator("[data-claude-code-config]").first).to_be_visible()
    if name == "alerts-page" and mode.startswith("phone"):  # the rows stacked as cards, not a table to scroll
        cell = page.locator("#alerts-table tr[data-alert] td").first
        expect(cell).to_be_visible()
        assert cell.evaluate("td => getComputedStyle(td).display") == "block"
    check(page, screenshot_dir, f"{name}-{mode}")
    if mode.startswith("phone"):  # nothing wider than the phone: no page scrolls sideways (issue 47)
        assert page.evaluate("document.documentElement.scrollWidth") <= MODES[mode][0]["width"], name
    page.context.close()


@pytest.mark.parametrize("mode", list(MODES))
def test_the_forbidden_page_and_the_login_page(browser, web, signed_in, screenshot_dir, mode):
    page = mode_page(browser, web, signed_in, "none", mode)
    page.goto(f"{web.url}/analytics/")
    expect(page.locator(".error-page [data-reason]")).to_be_visible()
    check(page, screenshot_dir, f"forbidden-{mode}")
    login = mode_page(browser, web, signed_in, None, mode)
    login.goto(f"{web.url}/login/")
    login.fill("#id_username", "nobody")
    login.fill("#id_password", "wrong")
    login.click("button[type=submit]")
    login.wait_for_load_state()
    check(login, screenshot_dir, f"login-refused-{mode}")


ADMIN_PAGES = {
    "policy-form": "/admin/compaction_app/compactionpolicy/{policy}/change/",
    "policy-list": "/admin/compaction_app/compactionpolicy/",
    "prompt-list": "/admin/compaction_app/prompt/",
    "provider-form": "/admin/compaction_app/provider/{provider}/change/",
    "hook-list": "/admin/compaction_app/hook/",
    "alert-destination-add": "/admin/compaction_app/alertdestination/add/",
    "gateway-route-form": "/admin/gateway_app/gatewayroute/{route}/change/",
    "gateway-route-list": "/admin/gateway_app/gatewayroute/",
    # issue 47: every admin form the project adds or changes (users' groups and their tokens' owners, keys), and
    # the lists whose numbers and filters it writes
    "gateway-route-add": "/admin/gateway_app/gatewayroute/add/",
    "gateway-key-form": "/admin/gateway_app/gatewaykey/{key}/change/",
    "gateway-key-add": "/admin/gateway_app/gatewaykey/add/",
    "user-form": "/admin/auth/user/{user}/change/",
    "user-add": "/admin/auth/user/add/",
    "group-form": "/admin/auth/group/{group}/change/",
    "alert-settings": "/admin/compaction_app/alertsettings/",
    "session-form": "/admin/sessions_app/session/{session}/change/",
    "compaction-list": "/admin/compaction_app/compaction/",
    "attempt-list": "/admin/compaction_app/compactionattempt/",
}


@pytest.mark.parametrize("mode", list(MODES))
def test_the_policy_form_and_the_admin_forms_the_project_adds(browser, web, signed_in, screenshot_dir, mode):
    page = mode_page(browser, web, signed_in, "admin", mode)
    seed = web.seed["a11y"]
    ids = {"policy": web.seed["policy"], "provider": web.seed["provider"], "route": seed["route"], "key": seed["key"],
           "user": web.user("operator")["id"], "group": seed["group"], "session": seed["summarised_session"]}
    for name, path in ADMIN_PAGES.items():
        page.goto(web.url + path.format(**ids))
        if name == "policy-form":
            expect(page.locator("#id_compact_prompt_helptext")).to_contain_text("Used by:")
        if name == "user-form":  # the groups' two-box picker, built on load (the group form's are read-only)
            expect(page.locator(".selector .help-tooltip").first).to_be_attached()
        assert page.locator("#content").count() == 1, name  # the admin page itself, not a 404 or the login
        # The admin's help texts name Codex's settings by their keys, on purpose: numbers only.
        check(page, screenshot_dir, f"{name}-{mode}", codes=False)
    # Saving a policy that running sessions use asks first (issue 47 item 6): the form in that state.
    page.goto(web.url + ADMIN_PAGES["policy-form"].format(**ids))
    page.fill("#id_name", "default, renamed")  # refused until ticked: nothing is saved
    page.click("input[name=_save]")
    expect(page.locator(".errorlist").first).to_contain_text("This change reaches")
    check(page, screenshot_dir, f"policy-form-asks-{mode}", codes=False)
    page.context.close()


@pytest.mark.parametrize("mode", list(MODES))
def test_the_states_a_click_opens(browser, web, signed_in, screenshot_dir, mode):
    """What the other browser tests open with a click: the start form over the board (the menu first on a phone),
    and a new API token shown once."""
    page = mode_page(browser, web, signed_in, "admin", mode)
    page.goto(f"{web.url}/")
    if mode.startswith("phone"):
        page.click(".nav-toggle")
        expect(page.locator(".nav-toggle")).to_have_attribute("aria-expanded", "true")
        check(page, screenshot_dir, f"phone-menu-open-{mode}")
        page.click(".nav-toggle")
    page.click("text=Start simulated sessions")
    expect(page.locator(".start-form")).to_be_visible()
    check(page, screenshot_dir, f"start-form-open-{mode}")
    page.goto(f"{web.url}/api-tokens/")
    page.click("#api-token-form button[type=submit]")
    expect(page.locator("#new-api-token")).to_be_visible()
    check(page, screenshot_dir, f"api-token-shown-{mode}")
    page.context.close()


def test_refusal_notices_and_import_errors(browser, web, screenshot_dir):
    page = checked_page(browser, web, "admin")
    seed = web.seed["a11y"]
    # A 400 refusal beside the form: extra instructions with a method that sends no prompt.
    page.goto(f"{web.url}/sessions/{seed['summarised_session']}/")
    page.select_option("#compact-form select[name=strategy]", "token_budget")
    page.fill("#compact-form [name=instructions]", "keep the file names")
    page.click("#compact-form button[type=submit]")
    expect(page.locator("#compact-form .note--error, #compact-form .refusal").first).to_be_visible(
        timeout=LIVE_TIMEOUT)
    check(page, screenshot_dir, "refusal-400")
    # A 409: a recovery of a session whose run is not paused... or a run control refused (stopping twice).
    page.goto(f"{web.url}/sessions/{seed['run_session']}/")
    page.locator("#run-controls button", has_text="Stop").click()
    expect(page.locator("#run-controls [data-run-status]")).to_have_text("stopped", timeout=LIVE_TIMEOUT)
    answer = page.request.post(f"{web.url}/sessions/{seed['run_session']}/run/resume/",
                               headers={"HX-Request": "true", "X-CSRFToken": csrf(page)})
    assert answer.status == 409
    check(page, screenshot_dir, "after-409")
    # Import errors listed under the form.
    page.goto(f"{web.url}/import/")
    page.set_input_files("form.import-form input[type=file]", str(BAD_ROLLOUT))
    page.check("form.import-form input[name=strict]")
    page.click("form.import-form button[type=submit]")
    expect(page.locator("form.import-form #import-errors")).to_contain_text("Nothing was imported.")
    check(page, screenshot_dir, "import-errors")


def csrf(page: Page) -> str:
    return page.evaluate("() => JSON.parse(document.body.getAttribute('hx-headers'))['X-CSRFToken']")


def focused(page: Page) -> str:
    return page.evaluate("() => { const e = document.activeElement; return (e.textContent || '').trim() + '|' + "
                         "e.tagName; }")


def test_skip_links_come_first_and_the_first_run_control_is_a_few_tabs_away(login, web, screenshot_dir):
    page = login("operator")
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{web.url}/")
    expect(page.locator("#fleet-rows form[data-run-control] button").first).to_be_visible(timeout=LIVE_TIMEOUT)
    page.keyboard.press("Tab")
    assert focused(page) == "Skip to content|A"
    expect(page.locator(".skip-link", has_text="Skip to content")).to_be_in_viewport()  # shown once focused
    page.keyboard.press("Tab")
    assert focused(page) == "Skip to the sessions|A"
    page.keyboard.press("Tab")
    assert focused(page) == "Skip to the first run control|A"
    page.keyboard.press("Enter")
    assert focused(page) in ("Pause|BUTTON", "Resume|BUTTON", "Stop|BUTTON")
    page.screenshot(path=str(screenshot_dir / "keyboard-first-run-control.png"))
    # "Skip to the sessions" lands on the table: the next Tab is the first row's first control, in row order.
    page.goto(f"{web.url}/")
    expect(page.locator("#live-status")).to_have_attribute("data-state", "open", timeout=LIVE_TIMEOUT)
    for _ in range(2):
        page.keyboard.press("Tab")
    assert focused(page) == "Skip to the sessions|A"
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.activeElement.id") == "fleet-table"
    page.keyboard.press("Tab")
    first_row_link = page.locator("#fleet-rows tr").first.locator("a").first.inner_text()
    assert focused(page) == f"{first_row_link}|A"


def test_every_control_of_the_session_page_is_reachable_by_tab_in_reading_order(login, web, screenshot_dir):
    page = login("operator")
    page.goto(f"{web.url}/sessions/{web.seed['a11y']['stuck_seeded']}/")
    page.keyboard.press("Tab")
    assert focused(page) == "Skip to content|A"
    page.keyboard.press("Enter")
    seen = []
    for _ in range(80):
        page.keyboard.press("Tab")
        seen.append(page.evaluate("() => { const e = document.activeElement; const r = e.getBoundingClientRect();"
                                  " return [e.tagName, e.getAttribute('data-recover') || e.name || e.id || "
                                  "(e.textContent || '').trim().slice(0, 30), r.top + window.scrollY]; }"))
    names = [name for _, name, _ in seen]
    for control in ("local", "token_budget", "strategy", "fault"):
        assert control in names, (control, names)
    # The recoveries come before the fault form, as on the page.
    assert names.index("local") < names.index("fault")
    page.screenshot(path=str(screenshot_dir / "keyboard-session-page.png"))


# --- issue 47: the inspector's height, the session page's skip links, the session head, dark mode, session kinds --

UNFOLD = """() => {
    for (const el of document.querySelectorAll('.items--scroll, .scroll-box, ul.forgotten')) el.style.maxHeight = 'none';
    for (const el of document.querySelectorAll('details')) el.open = true;
}"""


def test_the_inspector_of_a_long_history_is_short_at_1280_px(browser, web, screenshot_dir):
    page = checked_page(browser, web, "operator")
    page.goto(f"{web.url}/compactions/{web.seed['a11y']['long_compaction']}/")
    expect(page.locator("#before .item").first).to_be_visible()
    height = page.evaluate("document.documentElement.scrollHeight")
    page.screenshot(path=str(screenshot_dir / "inspector-long-1280.png"), full_page=True)
    # The same page with every box unfolded is the inspector as it was (every item and definition laid out).
    page.evaluate(UNFOLD)
    unfolded = page.evaluate("document.documentElement.scrollHeight")
    print(f"inspector height at 1280 px: {height} px (unfolded, as before: {unfolded} px)")
    assert height <= 3200 and height * 2 <= unfolded, (height, unfolded)
    page.reload()
    # The figures come first; the definitions are one folded line after them.
    definitions = page.locator("#token-definitions")
    expect(definitions).not_to_have_attribute("open", "")
    assert definitions.bounding_box()["y"] > page.locator("#tokens-before").bounding_box()["y"]
    assert definitions.bounding_box()["height"] < 30
    page.context.close()


def test_pause_is_three_tabs_from_the_top_of_a_running_sessions_page(login, web, screenshot_dir):
    page = login("operator")
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{web.url}/sessions/{web.seed['a11y']['kept_running']}/")
    expect(page.locator("#live-status, .live-dot").first).to_have_attribute("data-state", "open", timeout=LIVE_TIMEOUT)
    expect(page.locator("#run-controls button", has_text="Pause")).to_be_visible()
    page.keyboard.press("Tab")
    assert focused(page) == "Skip to content|A"
    page.keyboard.press("Tab")
    assert focused(page) == "Skip to the run controls|A"
    page.keyboard.press("Enter")
    assert focused(page) == "Pause|BUTTON"
    page.screenshot(path=str(screenshot_dir / "keyboard-session-pause.png"))
    page.goto(f"{web.url}/sessions/{web.seed['a11y']['kept_running']}/")
    for _ in range(3):
        page.keyboard.press("Tab")
    assert focused(page) == "Skip to Compact now|A"
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.activeElement.name") == "strategy"


@pytest.mark.parametrize("viewport", [(1280, 800), (1920, 1080), (390, 844)])
def test_the_session_heads_facts_never_break_inside_a_word(browser, web, signed_in, screenshot_dir, viewport):
    width, height = viewport
    page = signed_in_page(browser, web, signed_in, "operator", viewport={"width": width, "height": height})
    page.goto(f"{web.url}/sessions/{web.seed['a11y']['kept_running']}/")
    heights = page.evaluate("""() => Array.from(document.querySelectorAll('#session-head .facts dd'))
        .map(dd => [dd.textContent.trim(), dd.getBoundingClientRect().height])""")
    line = min(h for _, h in heights)
    assert ("sim-1", line) in [(t, h) for t, h in heights], heights  # one line, like the shortest fact
    assert all(h == line for _, h in heights), heights
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=str(screenshot_dir / f"session-head-{width}.png"))
    page.context.close()


LUMINANCE = """(selector) => {
    const parse = c => c.match(/[\\d.]+/g).slice(0, 3).map(Number);
    const lum = rgb => { const [r, g, b] = rgb.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
                         return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
    const el = document.querySelector(selector);
    let bg = getComputedStyle(el).backgroundColor, node = el;
    while (bg === 'rgba(0, 0, 0, 0)' && node.parentElement) { node = node.parentElement; bg = getComputedStyle(node).backgroundColor; }
    if (bg === 'rgba(0, 0, 0, 0)') bg = getComputedStyle(document.body).backgroundColor;
    const fg = lum(parse(getComputedStyle(el).color)), back = lum(parse(bg));
    return {background: back, text: fg, contrast: (Math.max(fg, back) + 0.05) / (Math.min(fg, back) + 0.05)};
}"""


@pytest.mark.parametrize("path, selector", [
    ("/", "#fleet-table td.c-title a"),
    ("/sessions/{claude_session}/", "#history .item__body"),
    ("/compactions/{long_compaction}/", "#tokens-before"),
    ("/alerts/", "main h1"),
    ("/analytics/", "main h1"),
])
def test_dark_mode_follows_the_browsers_preference_with_readable_text(browser, web, signed_in, screenshot_dir, path,
                                                                     selector):
    url = web.url + path.format(**web.seed["a11y"])
    found = {}
    for scheme in ("light", "dark"):
        page = signed_in_page(browser, web, signed_in, "admin", color_scheme=scheme)
        page.goto(url)
        found[scheme] = page.evaluate(LUMINANCE, selector)
        found[scheme]["body"] = page.evaluate(LUMINANCE, "body")["background"]
        page.screenshot(path=str(screenshot_dir / f"scheme-{scheme}-{path.strip('/').replace('/', '-') or 'fleet'}.png"))
        page.context.close()
    light, dark = found["light"], found["dark"]
    assert light["body"] > 0.8 and dark["body"] < 0.05, found  # a dark page in the dark scheme, light otherwise
    assert dark["text"] > dark["background"] and light["text"] < light["background"], found  # light ink on dark
    assert dark["contrast"] >= 4.5 and light["contrast"] >= 4.5, found


def test_sessions_the_simulator_does_not_drive_do_not_look_simulated(browser, web, screenshot_dir):
    page = checked_page(browser, web, "operator")
    seed = web.seed["a11y"]
    for session in (seed["claude_session"], seed["gateway_session"]):
        page.goto(f"{web.url}/sessions/{session}/")
        expect(page.locator("#session-head h1")).to_be_visible()
        expect(page.locator("#run-controls")).to_be_hidden()
        expect(page.get_by_text("Simulated run")).to_have_count(0)
    page.goto(f"{web.url}/sessions/{seed['claude_session']}/")
    expect(page.locator("#session-head h1")).to_have_text("imported: fix parser bug 3")
    expect(page.locator("#session-head .facts")).to_contain_text("claude-sonnet-4-5")
    limit = int(page.locator(".chart__limit").first.get_attribute("data-limit"))
    assert limit > 32_000  # the model's window, not the seeded provider's 32k
    page.goto(f"{web.url}/compactions/{seed['claude_compaction']}/")
    expect(page.locator("#claude-trigger")).to_have_text("auto-compact, near the context limit")
    page.goto(f"{web.url}/sessions/{seed['kept_running']}/")
    expect(page.locator("#run-controls h2")).to_have_text("Simulated run")
    # The derived rows of the import and the scenario windows are not offered when starting sessions.
    page.goto(f"{web.url}/")
    offered = page.eval_on_selector_all("#start-form select[name=provider] option",
                                        "options => options.map(o => o.textContent.trim())")
    assert offered == ["embedded", "embedded-claude"], offered  # the rows made by hand (the second: the Claude route's)
    page.context.close()
