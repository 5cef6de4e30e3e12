//! Headless Chromium (or Firefox ESR, for the tests run in both) driven over WebDriver: one
//! `chromedriver` (or `geckodriver`) process started by the test on a
//! free port, and one browser per participant, each with its own fresh profile (so two browsers
//! are two people with two cookie jars).
//!
//! Every interaction waits explicitly for its element (by `data-testid`, as listed in
//! docs/protocol.md) with a time limit, and retries when the room's script replaced the element
//! between finding and clicking it: the option buttons and selects are rebuilt on every view.

use std::future::Future;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail, ensure};
use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::error::{CmdError, ErrorStatus};
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

/// axe-core 4.14.1 (Deque Systems, MPL-2.0: tests/e2e/axe/LICENSE), unmodified: the
/// accessibility checker run in every page a test waits for ([`Browser::check_accessible`]).
const AXE: &str = include_str!("axe/axe.min.js");

/// Keys of the WebDriver standard, for [`Browser::keys`].
pub const TAB: char = '\u{E004}';
pub const ENTER: char = '\u{E007}';
pub const SPACE: char = '\u{E00D}';
pub const ARROW_DOWN: char = '\u{E015}';
/// The most presses of Tab [`Browser::tab_to`] tries before it fails.
const MAX_TABS: usize = 150;

/// How long one wait may take before the test fails.
pub const WAIT: Duration = Duration::from_secs(15);
/// Pause between two looks at the page while waiting.
const POLL: Duration = Duration::from_millis(60);
/// The size every screenshot in docs/screenshots/ is taken at.
pub const WINDOW: (u32, u32) = (1366, 768);

/// Runs the browser test `run` called `what` (e.g. "end-to-end arena test") with the Chromium
/// binary and its driver: skipped, saying so, with `WOZKIT_SKIP_E2E=1`; failing (never skipping)
/// when either tool is missing; failing when it runs longer than `limit`.
pub async fn run_browser_test<F, Fut>(what: &str, limit: Duration, run: F)
where
    F: FnOnce(PathBuf, PathBuf) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    run_with(what, limit, false, run).await;
}

/// Like [`run_browser_test`], in headless Firefox ESR through `geckodriver`: the test's `run`
/// gets the Firefox binary and its driver, and [`Driver::start`] opens Firefox windows. Fails
/// when either is missing, unless `WOZKIT_SKIP_E2E=1`.
pub async fn run_firefox_test<F, Fut>(what: &str, limit: Duration, run: F)
where
    F: FnOnce(PathBuf, PathBuf) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    run_with(what, limit, true, run).await;
}

/// Runs the browser test `run` in Chromium, then (crowdworkers use both) in Firefox ESR, each
/// within `limit`, as [`run_browser_test`] and [`run_firefox_test`] do.
pub async fn run_in_both_browsers<F, Fut>(what: &str, limit: Duration, run: F)
where
    F: Fn(PathBuf, PathBuf) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    run_browser_test(what, limit, &run).await;
    run_firefox_test(&format!("{what} in Firefox"), limit, &run).await;
}

/// Held by the browser test that runs now (see [`run_with`]).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Set while a test runs in Firefox: no screenshot is written then.
static IN_FIREFOX: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Runs `run` with the browser binary and driver (Firefox's when `firefox`), within `limit`, reporting how
/// it went: skipped, saying so, with `WOZKIT_SKIP_E2E=1`; failing when a tool is missing.
async fn run_with<F, Fut>(what: &str, limit: Duration, firefox: bool, run: F)
where
    F: FnOnce(PathBuf, PathBuf) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    if std::env::var("WOZKIT_SKIP_E2E").as_deref() == Ok("1") {
        eprintln!("{what} skipped (WOZKIT_SKIP_E2E=1)");
        return;
    }
    // One browser test at a time: the tests share one binary (and `IN_FIREFOX`), and two sets of
    // browser windows at once on a small machine would race their own waits. The limit counts
    // from here, not from the wait for the turn.
    let _turn = ONE_AT_A_TIME.lock().await;
    let tools = if firefox { find_firefox } else { find_tools };
    let (browser, driver) = tools().unwrap_or_else(|why| panic!("{why}"));
    // The pictures in docs/screenshots/ are Chromium's: a run in Firefox writes none.
    IN_FIREFOX.store(firefox, std::sync::atomic::Ordering::SeqCst);
    let started = Instant::now();
    let secs = || started.elapsed().as_secs_f64();
    match tokio::time::timeout(limit, run(browser, driver)).await {
        Ok(Ok(())) => eprintln!("{what} passed in {:.1} s", secs()),
        Ok(Err(e)) => panic!("{what} failed after {:.1} s: {e:#}", secs()),
        Err(_) => panic!("{what} did not finish within {limit:?}"),
    }
}

/// Finds a program on `PATH`.
fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// The Chromium binary and its driver, or why the test cannot run.
pub fn find_tools() -> Result<(PathBuf, PathBuf), String> {
    let chromium = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| which(name));
    match (chromium, which("chromedriver")) {
        (Some(chromium), Some(driver)) => Ok((chromium, driver)),
        (chromium, driver) => {
            let missing: Vec<&str> = [
                chromium.is_none().then_some("chromium"),
                driver.is_none().then_some("chromedriver"),
            ]
            .into_iter()
            .flatten()
            .collect();
            Err(format!(
                "the end-to-end test needs {} on PATH (Debian packages `chromium` and \
                 `chromium-driver`). Run scripts/test-all.sh, which installs them, or \
                 `apt-get install -y chromium chromium-driver`; set WOZKIT_SKIP_E2E=1 to skip \
                 this test on purpose.",
                missing.join(" and ")
            ))
        }
    }
}

/// Firefox ESR and geckodriver (Debian's `firefox-esr`; geckodriver from crates.io, which
/// scripts/test-all.sh installs with `cargo install geckodriver`), or why the test cannot run.
pub fn find_firefox() -> Result<(PathBuf, PathBuf), String> {
    let firefox = ["firefox-esr", "firefox"]
        .iter()
        .find_map(|name| which(name));
    let driver = which("geckodriver").or_else(|| {
        let home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
        Some(home.join("bin/geckodriver")).filter(|p| p.is_file())
    });
    match (firefox, driver) {
        (Some(firefox), Some(driver)) => Ok((firefox, driver)),
        (firefox, driver) => {
            let missing: Vec<&str> = [
                firefox.is_none().then_some("firefox-esr"),
                driver.is_none().then_some("geckodriver"),
            ]
            .into_iter()
            .flatten()
            .collect();
            Err(format!(
                "the Firefox browser test needs {} (Debian's `firefox-esr`; `cargo install \
                 geckodriver`). Run scripts/test-all.sh, which installs them; set \
                 WOZKIT_SKIP_E2E=1 to skip this test on purpose.",
                missing.join(" and ")
            ))
        }
    }
}

/// Which browser a [`Driver`] opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Chromium,
    Firefox,
}

/// How a browser is opened, beyond a fresh profile.
#[derive(Clone, Debug)]
pub struct Options {
    /// The page's size (width, height) in CSS pixels.
    pub size: (u32, u32),
    /// Whether cookies of other sites than the page's (a frame's) are blocked.
    pub block_third_party_cookies: bool,
    /// Whether pages with a certificate no authority signed (a test's own) are opened.
    pub accept_insecure_certs: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            size: WINDOW,
            block_third_party_cookies: false,
            accept_insecure_certs: false,
        }
    }
}

/// A running `chromedriver` or `geckodriver`; killed when dropped.
pub struct Driver {
    child: Child,
    url: String,
    /// The browser binary it opens.
    chromium: PathBuf,
    /// The driver's binary: geckodriver runs one session at a time, so each Firefox gets a
    /// driver of its own.
    driver: PathBuf,
    pub engine: Engine,
}

impl Driver {
    /// Starts the driver `chromedriver` for the browser binary `chromium`: Firefox when the
    /// driver is `geckodriver`, Chromium otherwise.
    pub async fn start(chromium: &Path, chromedriver: &Path) -> Result<Driver> {
        let engine = if chromedriver
            .file_name()
            .is_some_and(|n| n.to_string_lossy().contains("geckodriver"))
        {
            Engine::Firefox
        } else {
            Engine::Chromium
        };
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .context("finding a free port for chromedriver")?
            .port();
        // Its own process group, so that the browsers it starts can be ended with it.
        let child = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .args(match engine {
                Engine::Firefox => &["--host", "127.0.0.1"][..],
                Engine::Chromium => &[][..],
            })
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", chromedriver.display()))?;
        let mut driver = Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
            chromium: chromium.to_path_buf(),
            driver: chromedriver.to_path_buf(),
            engine,
        };
        let started = Instant::now();
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            if let Some(status) = driver.child.try_wait()? {
                bail!("chromedriver exited at start ({status})");
            }
            if started.elapsed() > WAIT {
                bail!("chromedriver did not listen on port {port} within {WAIT:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(driver)
    }

    /// Opens a new headless browser with a fresh profile, its page [`WINDOW`] in size.
    pub async fn browser(&self, name: &str) -> Result<Browser> {
        self.browser_sized(name, WINDOW).await
    }

    /// Opens a new headless browser with a fresh profile, its page `size` (width, height) in
    /// CSS pixels, e.g. a phone's.
    pub async fn browser_sized(&self, name: &str, size: (u32, u32)) -> Result<Browser> {
        let options = Options {
            size,
            ..Options::default()
        };
        self.browser_with(name, options).await
    }

    /// Opens a new headless browser with a fresh profile and these [`Options`].
    pub async fn browser_with(&self, name: &str, options: Options) -> Result<Browser> {
        let Options {
            size,
            block_third_party_cookies,
            accept_insecure_certs,
        } = options;
        let profile = tempfile::tempdir().context("browser profile dir")?;
        if self.engine == Engine::Firefox {
            return self
                .firefox(
                    name,
                    size,
                    block_third_party_cookies,
                    accept_insecure_certs,
                    profile,
                )
                .await;
        }
        let args = vec![
            "--headless".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-quic".into(),
            "--disable-dev-shm-usage".into(),
            "--force-device-scale-factor=1".into(),
            "--lang=en-US".into(),
            format!("--window-size={},{}", size.0, size.1),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let mut chrome = json!({ "binary": self.chromium, "args": args });
        if block_third_party_cookies {
            chrome["prefs"] = json!({
                "profile": { "block_third_party_cookies": true, "cookie_controls_mode": 1 }
            });
        }
        let caps = json!({
            "browserName": "chrome",
            "acceptInsecureCerts": accept_insecure_certs,
            "goog:chromeOptions": chrome,
        });
        open(name, caps, &self.url, size, profile, None).await
    }

    /// A headless Firefox with a fresh profile (geckodriver makes one per session), its
    /// background connections off as Chromium's are: no updates, telemetry, safe-browsing
    /// lists, captive-portal or connectivity checks.
    async fn firefox(
        &self,
        name: &str,
        size: (u32, u32),
        block_third_party_cookies: bool,
        accept_insecure_certs: bool,
        profile: tempfile::TempDir,
    ) -> Result<Browser> {
        // Firefox's own window style keeps a window at least 500 pixels wide; a phone's page
        // is narrower.
        let chrome = profile.path().join("chrome");
        std::fs::create_dir_all(&chrome).context("the Firefox profile's chrome folder")?;
        std::fs::write(
            chrome.join("userChrome.css"),
            ":root, #main-window, #navigator-toolbox, #nav-bar, #TabsToolbar \
             { min-width: 0 !important; }\n",
        )
        .context("writing userChrome.css")?;
        let prefs = json!({
            "intl.accept_languages": "en-US",
            "app.update.auto": false,
            "app.update.enabled": false,
            "browser.safebrowsing.malware.enabled": false,
            "browser.safebrowsing.phishing.enabled": false,
            "browser.safebrowsing.downloads.enabled": false,
            "datareporting.policy.dataSubmissionEnabled": false,
            "datareporting.healthreport.uploadEnabled": false,
            "toolkit.telemetry.enabled": false,
            "network.captive-portal-service.enabled": false,
            "network.connectivity-service.enabled": false,
            "extensions.update.enabled": false,
            "browser.shell.checkDefaultBrowser": false,
            "browser.region.update.enabled": false,
            "network.dns.disablePrefetch": true,
            "network.prefetch-next": false,
            "layout.css.devPixelsPerPx": "1.0",
            // The profile's userChrome.css (below) lets a window be as narrow as a phone.
            "toolkit.legacyUserProfileCustomizations.stylesheets": true,
            // 1: cookies of other sites than the page's are refused; 5 (the default) keeps
            // them, partitioned per site.
            "network.cookie.cookieBehavior": if block_third_party_cookies { 1 } else { 5 },
        });
        let caps = json!({
            "browserName": "firefox",
            "acceptInsecureCerts": accept_insecure_certs,
            "moz:firefoxOptions": {
                "binary": self.chromium,
                "args": [
                    "-headless",
                    "-profile",
                    profile.path(),
                    "-width",
                    size.0.to_string(),
                    "-height",
                    size.1.to_string()
                ],
                "prefs": prefs,
            },
        });
        let own = Box::pin(Driver::start(&self.chromium, &self.driver)).await?;
        let url = own.url.clone();
        open(name, caps, &url, size, profile, Some(own)).await
    }
}

/// Opens a browser session with `caps` at the driver listening on `url`; `own` is a driver
/// started for this browser alone (Firefox), ended after it.
async fn open(
    name: &str,
    caps: Value,
    url: &str,
    size: (u32, u32),
    profile: tempfile::TempDir,
    own: Option<Driver>,
) -> Result<Browser> {
    let serde_json::Value::Object(caps) = caps else {
        bail!("capabilities are an object");
    };
    let client = ClientBuilder::new(HttpConnector::new())
        .capabilities(caps)
        .connect(url)
        .await
        .with_context(|| format!("starting the browser {name} through its driver at {url}"))?;
    let browser = Browser {
        name: name.to_string(),
        client,
        size,
        _profile: profile,
        checked: Default::default(),
        _driver: own,
    };
    browser.fit_viewport().await?;
    Ok(browser)
}

/// Ends chromedriver and whatever is left in its process group (browsers of a test that failed
/// before it could close them).
impl Drop for Driver {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Errors that mean "look again": the element is not there yet or was just replaced.
/// A click that landed on another element (e.g. during a re-layout) is retried too.
fn transient(e: &CmdError) -> bool {
    e.is_no_such_element()
        || e.is_stale_element_reference()
        || e.is_element_not_interactable()
        || matches!(e, CmdError::Standard(w) if w.error == ErrorStatus::ElementClickIntercepted)
}

/// Calls `probe` until it yields a value, for at most `within`.
pub async fn until<T, F, Fut>(what: &str, within: Duration, mut probe: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let started = Instant::now();
    loop {
        if let Some(v) = probe().await? {
            return Ok(v);
        }
        if started.elapsed() > within {
            bail!("timed out after {within:?} waiting for {what}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// One participant's browser.
pub struct Browser {
    pub name: String,
    client: Client,
    /// The page's size, width and height.
    size: (u32, u32),
    /// The profile (cookies, storage) of this browser only; removed when the test ends.
    _profile: tempfile::TempDir,
    /// The pages already checked by axe-core (by the name the test waited for), so each is
    /// checked once per browser.
    checked: std::sync::Mutex<std::collections::HashSet<String>>,
    /// A Firefox's own geckodriver, ended after the browser (declared last: dropped last).
    _driver: Option<Driver>,
}

fn testid(id: &str) -> String {
    format!("[data-testid=\"{id}\"]")
}

impl Browser {
    /// Makes the viewport (what pages and screenshots see) exactly its size: headless
    /// Chromium still reserves room for its toolbars inside `--window-size`.
    async fn fit_viewport(&self) -> Result<()> {
        let v = self
            .js(
                "return [outerWidth - innerWidth, outerHeight - innerHeight]",
                vec![],
            )
            .await?;
        let chrome: Vec<u32> = serde_json::from_value(v).context("window sizes")?;
        let (dw, dh) = (
            chrome.first().copied().unwrap_or(0),
            chrome.get(1).copied().unwrap_or(0),
        );
        if (dw, dh) != (0, 0) {
            self.client
                .set_window_size(self.size.0 + dw, self.size.1 + dh)
                .await
                .with_context(|| format!("{}: resizing the window", self.name))?;
        }
        Ok(())
    }

    pub async fn goto(&self, url: &str) -> Result<()> {
        self.client
            .goto(url)
            .await
            .with_context(|| format!("{}: opening {url}", self.name))
    }

    /// Runs a script in the page and returns what it returns.
    /// Like [`Browser::js`] for a page that may be reloading: Firefox answers a script that runs
    /// while the page is replaced with `null`, where Chromium waits for the new page; this looks
    /// again (for up to 2 s) until the page answers something else.
    pub async fn js_settled(&self, script: &str, args: Vec<Value>) -> Result<Value> {
        for _ in 0..100 {
            let v = self.js(script, args.clone()).await?;
            if !v.is_null() {
                return Ok(v);
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        bail!("{}: the page answered nothing to {script}", self.name)
    }

    pub async fn js(&self, script: &str, args: Vec<Value>) -> Result<Value> {
        self.client
            .execute(script, args)
            .await
            .with_context(|| format!("{}: running {script}", self.name))
    }

    /// Where the browser is and what it says, for error messages.
    async fn describe(&self) -> String {
        let probe = "const t = (id) => (document.getElementById(id) || {}).textContent || '';\
                     return location.pathname + location.search\
                       + ' | notice: ' + t('notice') + ' | action: ' + t('action-reason')\
                       + ' | ' + (document.body ? document.body.innerText.slice(0, 600) : '')";
        match self.client.execute(probe, vec![]).await {
            Ok(Value::String(s)) => s,
            Ok(v) => v.to_string(),
            Err(e) => format!("(page unreadable: {e})"),
        }
    }

    /// Adds this browser's name and page to the error of a failed wait.
    async fn explain<T>(&self, r: Result<T>) -> Result<T> {
        match r {
            Ok(v) => Ok(v),
            Err(e) => Err(anyhow!(
                "{}: {e:#}\n  page: {}",
                self.name,
                self.describe().await
            )),
        }
    }

    /// Waits until `script` returns something other than null, false, "" or 0; returns it. A
    /// script the driver gave up on (`script timeout`: Chromium answers so when the page is
    /// replaced while the script waits, which a slow machine makes likelier) is asked again.
    pub async fn wait_js(&self, what: &str, script: &str, args: Vec<Value>) -> Result<Value> {
        let r = until(what, WAIT, || async {
            let v = match self.client.execute(script, args.clone()).await {
                Ok(v) => v,
                Err(CmdError::Standard(w)) if w.error == ErrorStatus::ScriptTimeout => {
                    return Ok(None);
                }
                Err(e) => {
                    return Err(e).with_context(|| format!("{}: running {script}", self.name));
                }
            };
            let falsy = matches!(&v, Value::Null | Value::Bool(false))
                || v.as_str() == Some("")
                || v.as_f64() == Some(0.0);
            Ok((!falsy).then_some(v))
        })
        .await;
        self.explain(r).await
    }

    /// Waits for the page of the flow (`data-page` of `<main>`) to be `page`, then checks it
    /// with axe-core the first time this browser sees it ([`Browser::check_accessible`]).
    pub async fn wait_page(&self, page: &str) -> Result<()> {
        let script = "return (document.querySelector('main[data-page]') || {dataset: {}}).dataset.page === arguments[0]";
        self.wait_js(&format!("the {page} page"), script, vec![json!(page)])
            .await?;
        self.check_accessible(page).await
    }

    /// Runs axe-core on the page as it is now and fails, listing them, on any serious or
    /// critical violation (WCAG 2.x A and AA rules and axe's best practices). Each `name` is
    /// checked once per browser.
    pub async fn check_accessible(&self, name: &str) -> Result<()> {
        let first = self
            .checked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string());
        if !first {
            return Ok(());
        }
        // Injected as the body of the script WebDriver runs (not a <script> element, which the
        // pages' Content-Security-Policy would refuse); its UMD wrapper sets `window.axe`.
        let injected = self
            .js(
                &format!("if (!window.axe) {{ {AXE}\n }} return !!window.axe"),
                vec![],
            )
            .await?;
        if injected != json!(true) {
            bail!("{}: axe-core did not load in the {name} page", self.name);
        }
        let found = self
            .client
            .execute_async(
                "const done = arguments[arguments.length - 1];\
                 axe.run(document, {resultTypes: ['violations']})\
                   .then((r) => done(r.violations\
                     .filter((v) => v.impact === 'serious' || v.impact === 'critical')\
                     .map((v) => `${v.id} (${v.impact}): ${v.help}; at ${v.nodes.slice(0, 4)\
                        .map((n) => n.target.join(' ') + (n.failureSummary ? ' [' + n.failureSummary.replace(/\\s+/g, ' ').slice(0, 160) + ']' : ''))\
                        .join(' | ')}`)))\
                   .catch((e) => done(['axe-core failed: ' + e]));",
                vec![],
            )
            .await
            .with_context(|| format!("{}: running axe-core in the {name} page", self.name))?;
        let violations: Vec<String> = serde_json::from_value(found).context("axe's answer")?;
        ensure!(
            violations.is_empty(),
            "{}: the {name} page has {} serious or critical accessibility violation(s):\n  {}",
            self.name,
            violations.len(),
            violations.join("\n  ")
        );
        Ok(())
    }

    /// Clicks the element with this `data-testid` once it is there and enabled.
    pub async fn click(&self, id: &str) -> Result<()> {
        self.click_css(&testid(id)).await
    }

    /// Clicks the element the CSS selector `sel` finds once it is there and enabled.
    pub async fn click_css(&self, sel: &str) -> Result<()> {
        let r = until(&format!("an enabled {sel} to click"), WAIT, || async {
            let el = match self.client.find(Locator::Css(sel)).await {
                Ok(el) => el,
                Err(e) if transient(&e) => return Ok(None),
                Err(e) => return Err(e.into()),
            };
            match el.is_enabled().await {
                Ok(true) => {}
                Ok(false) => return Ok(None),
                Err(e) if transient(&e) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
            match el.click().await {
                Ok(()) => Ok(Some(())),
                Err(e) if transient(&e) => Ok(None),
                Err(e) => Err(e.into()),
            }
        })
        .await;
        self.explain(r).await
    }

    /// Presses `keys` one after the other, as a keyboard does: each goes to whatever has the
    /// focus (nothing is clicked or focused by the driver).
    pub async fn keys(&self, keys: &str) -> Result<()> {
        // Several headless Firefox windows on one machine: the one typed in must be the focused
        // window, as the window someone types in is (not something the page does).
        if self.js("return document.hasFocus()", vec![]).await? == json!(false) {
            let handle = self.client.window().await?;
            self.client.switch_to_window(handle).await?;
        }
        let mut seq = KeyActions::new("keyboard".into());
        for c in keys.chars() {
            seq = seq
                .then(KeyAction::Down { value: c })
                .then(KeyAction::Up { value: c });
        }
        self.client
            .perform_actions(seq)
            .await
            .with_context(|| format!("{}: pressing keys", self.name))
    }

    /// Moves the focus with Tab, as someone without a mouse does, to the enabled element the
    /// CSS selector `sel` finds (waiting first until it is there). Fails, naming the elements
    /// Tab went through, when it is not reached: it cannot be reached by keyboard.
    pub async fn tab_to(&self, sel: &str) -> Result<()> {
        self.wait_js(
            &format!("an enabled, visible {sel}"),
            "const e = document.querySelector(arguments[0]); \
             return !!e && !e.disabled && !!(e.offsetWidth || e.offsetHeight || e.getClientRects().length)",
            vec![json!(sel)],
        )
        .await?;
        let focused = "const a = document.activeElement; \
                       if (a && a.matches(arguments[0]) && !a.disabled) return 'yes'; \
                       if (!a || a === document.body) return 'body'; \
                       return a.tagName.toLowerCase() + (a.id ? '#' + a.id : '') \
                         + (a.dataset.testid ? '[' + a.dataset.testid + ']' : '') \
                         + (a.name ? '(' + a.name + ')' : '')";
        let mut path = vec![];
        for _ in 0..MAX_TABS {
            let at = self.js(focused, vec![json!(sel)]).await?;
            match at.as_str() {
                Some("yes") => return Ok(()),
                Some(other) => path.push(other.to_string()),
                None => {}
            }
            self.keys(&TAB.to_string()).await?;
        }
        path.dedup();
        bail!(
            "{}: {sel} was not reached with {MAX_TABS} presses of Tab; the focus went through {}",
            self.name,
            path.join(" → ")
        )
    }

    /// Tabs to `sel` and presses Enter on it (a button, a link, a submit).
    pub async fn press_on(&self, sel: &str) -> Result<()> {
        self.tab_to(sel).await?;
        self.keys(&ENTER.to_string()).await
    }

    /// Tabs to `sel` (a field) and types `text` into it.
    pub async fn type_by_keys(&self, sel: &str, text: &str) -> Result<()> {
        self.tab_to(sel).await?;
        self.keys(text).await
    }

    /// Chooses the radio button `value` of the group `name` by keyboard: Tab into the group,
    /// Space to check the focused one, then the arrow keys (which move the check) until the
    /// wanted one is checked.
    pub async fn choose_radio(&self, name: &str, value: &str) -> Result<()> {
        let group = format!("input[type=radio][name=\"{name}\"]");
        self.tab_to(&group).await?;
        self.keys(&SPACE.to_string()).await?;
        let checked = "const c = document.querySelector(arguments[0] + ':checked'); return c ? c.value : null";
        for _ in 0..20 {
            let now = self.js(checked, vec![json!(group)]).await?;
            if now.as_str() == Some(value) {
                return Ok(());
            }
            self.keys(&ARROW_DOWN.to_string()).await?;
        }
        bail!(
            "{}: the arrow keys never checked {value} in {name}",
            self.name
        )
    }

    /// Chooses the option `value` of the `<select>` `sel` by keyboard: Tab to it, then the
    /// down arrow until it is selected (from the first option: Home first).
    pub async fn choose_option(&self, sel: &str, value: &str) -> Result<()> {
        self.tab_to(sel).await?;
        self.keys("\u{E011}").await?;
        let current = "return document.querySelector(arguments[0]).value";
        for _ in 0..40 {
            if self.js(current, vec![json!(sel)]).await?.as_str() == Some(value) {
                return Ok(());
            }
            self.keys(&ARROW_DOWN.to_string()).await?;
        }
        bail!(
            "{}: the arrow keys never selected {value} in {sel}",
            self.name
        )
    }

    /// Makes the frame that the CSS selector `sel` finds (an `<iframe>`) the one every later
    /// command reads and acts in, once it is there; it stays so while the frame navigates.
    pub async fn enter_frame(&self, sel: &str) -> Result<()> {
        let r = until(&format!("the frame {sel}"), WAIT, || async {
            match self.client.find(Locator::Css(sel)).await {
                Ok(el) => match el.enter_frame().await {
                    Ok(()) => Ok(Some(())),
                    Err(e) if transient(&e) => Ok(None),
                    Err(e) => Err(e.into()),
                },
                Err(e) if transient(&e) => Ok(None),
                Err(e) => Err(e.into()),
            }
        })
        .await;
        self.explain(r).await
    }

    /// The names of the cookies the browser keeps for the current document's (or frame's)
    /// site, as WebDriver lists them: whether or not the page itself may read them.
    pub async fn cookie_names(&self) -> Result<Vec<String>> {
        let cookies = self
            .client
            .get_all_cookies()
            .await
            .with_context(|| format!("{}: reading the cookies", self.name))?;
        Ok(cookies.iter().map(|c| c.name().to_string()).collect())
    }

    /// Types `text` into the field with this `data-testid` (once it is enabled).
    pub async fn type_into(&self, id: &str, text: &str) -> Result<()> {
        self.type_into_css(&testid(id), text).await
    }

    /// Types `text` into the field the CSS selector `sel` finds (once it is enabled).
    pub async fn type_into_css(&self, sel: &str, text: &str) -> Result<()> {
        let r = until(&format!("an enabled {sel} to type into"), WAIT, || async {
            let el = match self.client.find(Locator::Css(sel)).await {
                Ok(el) => el,
                Err(e) if transient(&e) => return Ok(None),
                Err(e) => return Err(e.into()),
            };
            if !el.is_enabled().await.unwrap_or(false) {
                return Ok(None);
            }
            match el.send_keys(text).await {
                Ok(()) => Ok(Some(())),
                Err(e) if transient(&e) => Ok(None),
                Err(e) => Err(e.into()),
            }
        })
        .await;
        self.explain(r).await
    }

    /// Chooses `value` in the `<select>` with this `data-testid` and checks that it stuck.
    pub async fn select(&self, id: &str, value: &str) -> Result<()> {
        let sel = testid(id);
        let r = until(&format!("{sel} to offer `{value}`"), WAIT, || async {
            let el = match self.client.find(Locator::Css(&sel)).await {
                Ok(el) => el,
                Err(e) if transient(&e) => return Ok(None),
                Err(e) => return Err(e.into()),
            };
            match el.select_by_value(value).await {
                Ok(()) => {}
                Err(e) if transient(&e) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
            let now = self
                .js(
                    "return document.querySelector(arguments[0]).value",
                    vec![json!(sel)],
                )
                .await?;
            Ok((now.as_str() == Some(value)).then_some(()))
        })
        .await;
        self.explain(r).await
    }

    /// The text of the element with this `data-testid`, once it has some.
    pub async fn text(&self, id: &str) -> Result<String> {
        let script = "const e = document.querySelector(arguments[0]); return e ? e.textContent.trim() : null";
        let v = self
            .wait_js(
                &format!("text in {}", testid(id)),
                script,
                vec![json!(testid(id))],
            )
            .await?;
        Ok(v.as_str().unwrap_or_default().to_string())
    }

    /// The chat as (class, who, text, act label) per line, in order.
    pub async fn chat(&self) -> Result<Vec<ChatLine>> {
        let script = "return [...document.querySelectorAll('#chat li')].map((li) => ({\
              cls: li.className,\
              who: (li.querySelector('.who') || {}).textContent || '',\
              text: (li.querySelector('.text') || {}).textContent || '',\
              act: (li.querySelector('.act') || {}).textContent || null }))";
        let v = self.js(script, vec![]).await?;
        Ok(serde_json::from_value(v)?)
    }

    /// Waits until a chat line satisfies `pred`; returns it.
    pub async fn wait_chat(
        &self,
        what: &str,
        pred: impl Fn(&ChatLine) -> bool,
    ) -> Result<ChatLine> {
        self.wait_chat_after(0, what, pred).await
    }

    /// Waits until a chat line after the first `skip` ones satisfies `pred`; returns it.
    pub async fn wait_chat_after(
        &self,
        skip: usize,
        what: &str,
        pred: impl Fn(&ChatLine) -> bool,
    ) -> Result<ChatLine> {
        let r = until(&format!("a chat line: {what}"), WAIT, || async {
            Ok(self.chat().await?.into_iter().skip(skip).find(|l| pred(l)))
        })
        .await;
        self.explain(r).await
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Result<Vec<u8>> {
        self.client
            .screenshot()
            .await
            .with_context(|| format!("{}: screenshot", self.name))
    }

    /// Ends the browser (and its Chromium process).
    pub async fn close(self) -> Result<()> {
        self.client
            .close()
            .await
            .with_context(|| format!("{}: closing the browser", self.name))
    }
}

/// Closes every browser of `browsers`, in order; the first error, after all are closed.
pub async fn close_all<const N: usize>(browsers: [Browser; N]) -> Result<()> {
    let mut first = Ok(());
    for br in browsers {
        let closed = br.close().await;
        if first.is_ok() {
            first = closed;
        }
    }
    first
}

/// Opens `url` (an entry link) in `br` and walks it through consent and instructions into the
/// room.
pub async fn into_room(br: &Browser, url: &str) -> Result<()> {
    br.goto(url).await?;
    br.wait_page("consent").await?;
    br.click("accept").await?;
    br.wait_page("instructions").await?;
    br.click("continue").await?;
    br.wait_page("room").await
}

/// The wizard `w` uses the row `key` of the database panel's results and waits until the panel
/// shows it selected.
pub async fn use_row(w: &Browser, key: &str) -> Result<()> {
    w.click(&format!("db-use-{key}")).await?;
    w.wait_js(
        "the selection",
        "const s = document.getElementById('db-selected'); return !!s && s.dataset.key === arguments[0]",
        vec![json!(key)],
    )
    .await
    .map(drop)
}

/// The folder of the documentation's screenshots, `docs/screenshots/`.
pub fn screenshot_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/screenshots")
}

/// Whether the browser test running now runs in Firefox.
pub fn in_firefox() -> bool {
    IN_FIREFOX.load(std::sync::atomic::Ordering::SeqCst)
}

/// The path of `docs/screenshots/<file>` when that picture is to be written: when asked to
/// (`WOZKIT_UPDATE_SCREENSHOTS=1`) or when the file is missing.
pub fn screenshot_wanted(file: &str) -> Option<PathBuf> {
    if in_firefox() {
        return None;
    }
    let path = screenshot_dir().join(file);
    let update = std::env::var("WOZKIT_UPDATE_SCREENSHOTS").as_deref() == Ok("1");
    (update || !path.exists()).then_some(path)
}

/// Writes the picture `png` that `who` took to `path`, checking that it is a PNG.
pub fn write_png(who: &str, path: &Path, png: &[u8]) -> Result<()> {
    if png.len() < 8 || &png[1..4] != b"PNG" {
        bail!("{who}: the screenshot for {} is not a PNG", path.display());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, png).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

/// Waits until the page of `br` has loaded and its CSS transitions and animations have ended.
pub async fn settle(br: &Browser) -> Result<()> {
    br.wait_js(
        "the page's transitions to settle",
        "return document.readyState === 'complete'\
           && document.getAnimations().every((a) => a.playState !== 'running')",
        vec![],
    )
    .await
    .map(drop)
}

/// Writes the viewport of `br` to `docs/screenshots/<file>` when asked to
/// (`WOZKIT_UPDATE_SCREENSHOTS=1`) or when the file is missing.
pub async fn shoot(br: &Browser, file: &str) -> Result<()> {
    if let Some(path) = screenshot_wanted(file) {
        write_png(&br.name, &path, &br.screenshot().await?)?;
    }
    Ok(())
}

/// As [`shoot`], after the page's transitions have settled.
pub async fn shoot_settled(br: &Browser, file: &str) -> Result<()> {
    if let Some(path) = screenshot_wanted(file) {
        settle(br).await?;
        write_png(&br.name, &path, &br.screenshot().await?)?;
    }
    Ok(())
}

/// One line of the room's chat as the participant sees it.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct ChatLine {
    pub cls: String,
    pub who: String,
    pub text: String,
    /// The dialogue-act label under a wizard's own message (wizard page only).
    pub act: Option<String>,
}
