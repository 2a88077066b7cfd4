// admin.test.js — the admin panel in a real headless Chromium (Debian's /usr/bin/chromium,
// driven by playwright-core; nothing is downloaded). Run by tests/integration/admin_browser.sh,
// which starts tenancyd, nginx and the tenants and passes:
//   ADMIN_URL       http://admin.localhost:PORT
//   TENANT_URL      http://lite.localhost:PORT   (the suspended tenant's own site)
//   ADMIN_PASSWORD  the password set with `tenancy admin passwd`
//   ARTIFACTS       where screenshots go
//   CHROMIUM        the browser (default /usr/bin/chromium)
// Steps: log in, search the fleet, open a tenant, open a table, page through rows, run a
// query (and see a write refused), suspend and resume a tenant, the jobs pages and a cancel,
// the host charts, a tenant full of XSS payloads (pages, row view, live search, console).
// Any page error, CSP violation or dialog fails the run.
"use strict";
const { chromium } = require("playwright-core");
const fs = require("fs");
const path = require("path");

const ADMIN = process.env.ADMIN_URL;
const TENANT = process.env.TENANT_URL;
const PASSWORD = process.env.ADMIN_PASSWORD;
const OUT = process.env.ARTIFACTS || "artifacts";
const BROWSER = process.env.CHROMIUM || "/usr/bin/chromium";

let passed = 0, failed = 0;
const problems = [];
let current = null;   // the page, for a screenshot when the run stops
function ok(what) { passed++; console.log("ok: " + what); }
function bad(what) { failed++; console.log("FAIL: " + what); }
function check(cond, what) { if (cond) ok(what); else bad(what); }

async function shot(page, name) {
  const file = path.join(OUT, name + ".png");
  await page.screenshot({ path: file, fullPage: true });
  console.log("screenshot: " + file);
}

async function main() {
  if (!ADMIN || !PASSWORD) throw new Error("ADMIN_URL and ADMIN_PASSWORD are required");
  fs.mkdirSync(OUT, { recursive: true });
  const browser = await chromium.launch({
    executablePath: BROWSER,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  try {
    const context = await browser.newContext({ viewport: { width: 1360, height: 860 } });
    const page = await context.newPage();
    current = page;
    page.setDefaultTimeout(15000);
    page.on("pageerror", (e) => problems.push("page error: " + e.message));
    page.on("console", (m) => {
      // 4xx answers the test provokes (a wrong password, a refused write) are logged by
      // the browser as "Failed to load resource": those are expected, anything else is not.
      if (m.type() === "error" && !m.text().startsWith("Failed to load resource"))
        problems.push("console error: " + m.text());
    });
    page.on("dialog", async (d) => { problems.push("a dialog opened: " + d.message()); await d.dismiss(); });

    // ---- log in ----
    await page.goto(ADMIN + "/");
    check(new URL(page.url()).pathname === "/login", "without a session the panel sends the browser to /login");
    await shot(page, "01-login");
    await page.fill("#password", "not the password");
    await page.click("button[type=submit]");
    await page.waitForSelector("p.error");
    const loginError = await page.textContent("p.error");
    check(loginError.includes("Wrong"), "a wrong password is refused (" + loginError + ")");
    await page.fill("#password", PASSWORD);
    await Promise.all([page.waitForURL(ADMIN + "/"), page.click("button[type=submit]")]);
    await page.waitForSelector("#fleet");
    const cookies = await context.cookies();
    const sc = cookies.find((c) => c.name === "tn_admin");
    check(sc && sc.httpOnly && sc.sameSite === "Strict", "the session cookie is HttpOnly and SameSite=Strict");
    check(await page.evaluate(() => !document.cookie.includes("tn_admin")), "scripts cannot read the session cookie");
    const nRows = await page.locator("#fleet-rows tr").count();
    check(nRows >= 5, "the fleet lists the tenants (" + nRows + ")");
    await shot(page, "02-fleet");

    // ---- search the fleet (keyboard: "/" focuses the search; results as you type) ----
    await page.keyboard.press("/");
    check(await page.evaluate(() => document.activeElement && document.activeElement.id === "fleet-search"), "'/' focuses the search");
    await page.keyboard.type("lit");
    await page.waitForFunction(() => {
      const rows = document.querySelectorAll("#fleet-rows tr");
      return rows.length === 1 && rows[0].getAttribute("data-href") === "/t/lite";
    });
    ok("search as you type narrows the fleet to lite");
    await shot(page, "03-fleet-search");

    // ---- open the tenant with the keyboard (j, Enter) ----
    await page.locator("#fleet-search").blur();
    await page.keyboard.press("j");
    await Promise.all([page.waitForURL(ADMIN + "/t/lite"), page.keyboard.press("Enter")]);
    await page.waitForSelector("#tables");
    check((await page.textContent("h1")).includes("lite"), "j + Enter opens the tenant");
    check((await page.textContent("#tables")).includes("items"), "the tenant's tables are listed");
    await page.waitForSelector("#tenant-stats dl");
    await shot(page, "04-tenant");

    // ---- open a table and page through its rows ----
    await Promise.all([page.waitForURL(/\/t\/lite\/table\?name=items$/), page.click("#tables a:text-is('items')")]);
    await page.waitForSelector("#rows");
    const firstId = async () => (await page.textContent("#rows tbody tr:first-child td:first-child")).trim();
    check((await firstId()) === "1", "the table opens at the first row");
    check((await page.locator("#rows tbody tr").count()) === 50, "a page holds 50 rows");
    await shot(page, "05-table");
    await Promise.all([page.waitForURL(/after=50/), page.click("#next-page")]);
    check((await firstId()) === "51", "Next goes to the rows after key 50");
    await Promise.all([page.waitForURL(/after=100/), page.keyboard.press("]")]);
    check((await firstId()) === "101", "']' goes to the next page");
    await shot(page, "06-table-page3");
    await Promise.all([page.waitForURL(/before=101/), page.keyboard.press("[")]);
    check((await firstId()) === "51", "'[' goes back a page");
    // sort by a column, then filter a column
    await Promise.all([page.waitForNavigation(), page.click("#rows thead a.sort:has-text('price')")]);
    await Promise.all([page.waitForNavigation(), page.click("#rows thead a.sort:has-text('price')")]);
    check((await firstId()) === "120", "sorting by price, descending");
    await page.fill("input.colfilter[aria-label='filter name']", "item 7");
    await Promise.all([page.waitForNavigation(), page.press("input.colfilter[aria-label='filter name']", "Enter")]);
    const names = await page.$$eval("#rows tbody tr td:nth-child(2)", (t) => t.map((x) => x.textContent));
    check(names.length > 0 && names.every((n) => n.includes("item 7")), "a column filter (" + names.length + " rows)");
    // the row view
    await Promise.all([page.waitForURL(/\/row\?/), page.click("#rows tbody tr:first-child a.rowlink")]);
    await page.waitForSelector("#record");
    check((await page.textContent("#record")).includes("price"), "the row view shows every column");
    await page.goto(ADMIN + "/t/lite/table?name=notes&view=structure");
    check((await page.textContent("#fkeys")).includes("REFERENCES items"), "the structure shows foreign keys");
    await page.goto(ADMIN + "/t/lite/table?name=items&view=structure");
    check((await page.textContent("#columns")).includes("NOT NULL".toLowerCase()), "the structure shows nullability");
    check((await page.textContent("#indexes")).includes("items_name"), "the structure shows indexes");
    await shot(page, "07-structure");

    // ---- the SQL console ----
    await page.goto(ADMIN + "/t/lite/sql");
    await page.fill("#sql", "SELECT name, price FROM items WHERE id <= 5 ORDER BY id");
    await Promise.all([page.waitForNavigation(), page.press("#sql", "Control+Enter")]);
    await page.waitForSelector("#result");
    check((await page.locator("#result tbody tr").count()) === 5, "Ctrl+Enter runs the query: 5 rows");
    check((await page.textContent("#result-meta")).includes("5 rows"), "the result says how many rows");
    await shot(page, "08-console");
    await page.fill("#sql", "DELETE FROM items");
    await Promise.all([page.waitForNavigation(), page.click("#run")]);
    await page.waitForSelector("#result-error");
    check((await page.textContent("#result-error")).includes("Refused"), "a write is refused by the read-only console");
    await shot(page, "09-console-refused");
    const dl = page.waitForEvent("download");
    await page.fill("#sql", "SELECT id, name FROM items WHERE id <= 2");
    await page.click("#export-csv");
    const download = await dl;
    const csv = fs.readFileSync(await download.path(), "utf8");
    check(csv.replace(/\r/g, "") === "id,name\n1,item 1\n2,item 2\n", "CSV export downloads the result");

    // ---- suspend and resume a tenant ----
    await page.goto(ADMIN + "/t/lite");
    await Promise.all([page.waitForURL(/confirm\?action=suspend/), page.click("#action-suspend")]);
    await shot(page, "10-confirm-suspend");
    await Promise.all([page.waitForURL(ADMIN + "/t/lite"), page.click("#confirm")]);
    check((await page.textContent("h1 .state")).trim() === "suspended", "the tenant shows suspended");
    const site = await context.newPage();
    let resp = await site.goto(TENANT + "/");
    check(resp.status() === 403, "the tenant's own site answers 403 while suspended");
    await shot(page, "11-suspended");
    await Promise.all([page.waitForURL(/confirm\?action=resume/), page.click("#action-resume")]);
    await Promise.all([page.waitForURL(ADMIN + "/t/lite"), page.click("#confirm")]);
    check((await page.textContent("h1 .state")).trim() === "active", "the tenant shows active again");
    resp = await site.goto(TENANT + "/");
    check(resp.status() === 200, "the tenant's site is served again");
    await site.close();

    // ---- the audit log ----
    await page.goto(ADMIN + "/audit");
    const audit = await page.textContent("#audit");
    check(audit.includes("suspend") && audit.includes("resume"), "the audit log lists the suspend and the resume");

    // ---- the jobs: the hook jobs the creates queued (no job worker runs here: they wait) ----
    await page.keyboard.press("g");
    await Promise.all([page.waitForURL(ADMIN + "/jobs"), page.keyboard.press("j")]);
    ok("g j opens the jobs page");
    check((await page.locator("#jobs tbody tr").count()) >= 6, "the jobs page lists the tenants' hook jobs");
    check((await page.textContent("#job-counts")).includes("queued"), "with the counts per state");
    await shot(page, "15-jobs");
    await Promise.all([page.waitForURL(/\/t\/[a-z0-9-]+\/job\?id=\d+$/), page.click("#jobs tbody tr:first-child td a")]);
    check((await page.textContent("#job-state")).trim() === "queued", "a job's page shows it queued");
    await Promise.all([page.waitForNavigation(), page.click("#job-cancel")]);
    check((await page.textContent("#job-state")).trim() === "cancelled", "the cancel button cancels it");
    await shot(page, "16-job-cancelled");
    await page.goto(ADMIN + "/t/lite/jobs");
    check((await page.textContent("#jobs")).includes("tenancy.created"), "a tenant's jobs page lists its hook");

    // ---- the host page: charts drawn in the page ----
    await page.goto(ADMIN + "/host");
    await page.waitForFunction(() => document.querySelectorAll("#chart-rps svg path.line").length === 1, null, { timeout: 15000 });
    ok("the requests-per-second chart is drawn (SVG)");
    await page.waitForSelector("#chart-tenants svg rect.bar-req");
    ok("the per-tenant chart is drawn");
    check((await page.locator("#workers tbody tr").count()) >= 1, "workers are listed");
    await shot(page, "12-host");

    // ---- XSS payloads stay text ----
    await page.goto(ADMIN + "/?q=xss");
    await page.goto(ADMIN + "/t/xss");
    await page.goto(ADMIN + "/t/xss/table?name=things");
    check((await page.textContent("#rows")).includes("<img src=x"), "a hostile cell value shows as text");
    await shot(page, "13-xss");
    await page.goto(ADMIN + "/t/xss/table?name=things&view=structure");
    check((await page.locator("#main img").count()) === 0, "a hostile column name makes no element");
    await page.goto(ADMIN + "/t/xss/row?name=things&key=1");
    check((await page.textContent("#record")).includes("<img src=x"), "the row view shows a hostile value as text");
    check((await page.locator("#record img").count()) === 0, "and makes no element of it");
    // the live search puts the server's (escaped) rows into the page
    await page.goto(ADMIN + "/");
    await page.locator("#fleet-search").type("xs");
    await page.waitForFunction(() => {
      const rows = document.querySelectorAll("#fleet-rows tr");
      return rows.length === 1 && rows[0].getAttribute("data-href") === "/t/xss";
    });
    check((await page.textContent("#fleet-rows")).includes('<img src=x onerror=alert("name")>'), "search as you type shows a hostile name as text");
    check((await page.locator("#fleet-rows img").count()) === 0, "and makes no element of it");
    // a console result and its column names
    await page.goto(ADMIN + "/t/xss/sql");
    await page.fill("#sql", "SELECT *, '<script>alert(2)</script>' AS \"<img src=x onerror=alert(3)>\" FROM things");
    await Promise.all([page.waitForNavigation(), page.press("#sql", "Control+Enter")]);
    await page.waitForSelector("#result");
    check((await page.textContent("#result")).includes("<script>alert(2)</script>"), "a console result shows a hostile value as text");
    check((await page.locator("#result img, #result script").count()) === 0, "and makes no element of it");
    await shot(page, "14-xss-console");
    await page.waitForTimeout(300);
    check(!problems.some((p) => p.startsWith("a dialog")), "no payload ran (no dialog opened)");

    // ---- log out ----
    await page.goto(ADMIN + "/");
    await Promise.all([page.waitForURL(/\/login/), page.click("text=Log out")]);
    await page.goto(ADMIN + "/host");
    check(new URL(page.url()).pathname === "/login", "after logging out the panel asks for the login again");
  } catch (e) {
    if (current) await shot(current, "failed").catch(() => {});
    throw e;
  } finally {
    await browser.close();
  }
  for (const p of problems) bad(p);
  check(problems.length === 0, "no page error, CSP violation or dialog");
}

main()
  .catch((e) => { bad("the run stopped: " + (e && e.stack ? e.stack : e)); })
  .finally(() => {
    console.log(passed + " passed, " + failed + " failed");
    process.exit(failed === 0 ? 0 : 1);
  });
