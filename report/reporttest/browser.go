// Package reporttest loads report pages in a real headless Chromium for
// tests: it records every console error, uncaught exception and network
// request of the page, waits until the page says it has drawn, and gives
// access to the page's test hooks (window.tpscopeReport), mouse events and
// screenshots.
//
// The browser is found at $TPSCOPE_CHROMIUM, else as chromium,
// chromium-browser or google-chrome on PATH, else /usr/bin/chromium. Where
// none is installed, New skips the test and says how to install one
// (`apt-get install -y chromium`; `make test` does it).
package reporttest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// ChromiumPath returns the browser to use and whether one was found.
func ChromiumPath() (string, bool) {
	if p := os.Getenv("TPSCOPE_CHROMIUM"); p != "" {
		return p, true
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, true
		}
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium", true
	}
	return "", false
}

// Width and Height are the browser window's size in CSS pixels.
const (
	Width  = 1400
	Height = 1000
)

// opTimeout bounds one action on a loaded page.
const opTimeout = 30 * time.Second

// Browser is one headless Chromium with a fresh profile, closed when the
// test ends.
type Browser struct {
	ctx    context.Context
	unlist context.CancelFunc // stops the previous page's listener
}

// New starts the browser, or skips the test when none is installed. The
// flags keep a headless browser off the network entirely: this machine's
// closed network refuses the background connections (component updates,
// sync, QUIC probes) Chromium otherwise opens at start.
func New(t testing.TB) *Browser {
	t.Helper()
	path, ok := ChromiumPath()
	if !ok {
		t.Skip("no Chromium found (set TPSCOPE_CHROMIUM, or install it: apt-get install -y chromium; make test installs it)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(Width, Height),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first Run starts the browser; it must not carry a timeout (that
	// would stop the browser with it).
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[int]("1")); err != nil {
		t.Fatalf("start Chromium %s: %v", path, err)
	}
	return &Browser{ctx: ctx}
}

// Page is a report page loaded in the browser.
type Page struct {
	b   *Browser
	URL string
	// LoadWall is the wall time from the navigation's start until the
	// page set window.tpscopeReport.ready (everything drawn once).
	LoadWall time.Duration
	// RenderMs is the page's own count: performance.now() when it was
	// ready, ms since the navigation started.
	RenderMs float64

	mu       sync.Mutex
	problems []string // console errors, exceptions, browser log errors
	requests []string // every URL the page requested
}

// Open loads the HTML file at path and waits until it has drawn. The
// page replaces the one opened before (whose records then stop).
func (b *Browser) Open(t testing.TB, path string) *Page {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	p := &Page{b: b, URL: "file://" + abs}
	if b.unlist != nil {
		b.unlist()
	}
	lctx, unlist := context.WithCancel(b.ctx)
	b.unlist = unlist
	err = chromedp.Listen(lctx, func(ev any) {
		p.mu.Lock()
		defer p.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			p.requests = append(p.requests, e.Request.URL)
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				p.problems = append(p.problems, fmt.Sprintf("console.%s: %s", e.Type, strings.Join(args, " ")))
			}
		case *runtime.EventExceptionThrown:
			p.problems = append(p.problems, "exception: "+(&chromedp.ExceptionError{ExceptionDetails: e.ExceptionDetails}).Error())
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError {
				p.problems = append(p.problems, fmt.Sprintf("log (%s): %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL))
			}
		}
	})
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	ctx, cancel := context.WithTimeout(b.ctx, opTimeout)
	defer cancel()
	start := time.Now()
	if err := chromedp.Do(ctx, chromedp.Navigate(p.URL)); err != nil {
		t.Fatalf("open %s: %v", p.URL, err)
	}
	// The poll evaluates in the frame's execution context; when the
	// navigation replaces that context under it (a loaded machine can
	// let the old page's context outlive Navigate), Chromium answers
	// "Cannot find context with specified id": poll again in the new one.
	var ms float64
	for {
		ms, err = chromedp.Run(ctx, chromedp.Poll[float64]("window.tpscopeReport && window.tpscopeReport.ready && window.tpscopeReport.renderMs",
			chromedp.WithPollingInterval(5*time.Millisecond), chromedp.WithPollingTimeout(opTimeout)))
		if err == nil || !strings.Contains(err.Error(), "Cannot find context with specified id") || ctx.Err() != nil {
			break
		}
	}
	p.LoadWall = time.Since(start)
	if err != nil {
		t.Fatalf("%s never became ready: %v; page problems: %v", path, err, p.Problems())
	}
	p.RenderMs = ms
	return p
}

// Problems returns the console errors, exceptions and browser log errors
// seen since the page was opened.
func (p *Page) Problems() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.problems...)
}

// ForeignRequests returns the requests for anything but the page itself.
func (p *Page) ForeignRequests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, u := range p.requests {
		if u != p.URL {
			out = append(out, u)
		}
	}
	return out
}

// Requests returns every URL requested since the page was opened.
func (p *Page) Requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.requests...)
}

// Eval evaluates a JavaScript expression in the page and decodes its
// JSON value into T (opts: chromedp.EvalAwaitPromise for a promise).
func Eval[T any](t testing.TB, p *Page, expr string, opts ...chromedp.EvaluateOption) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.b.ctx, opTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		t.Fatalf("eval %s: %v", expr, err)
	}
	return v
}

// MoveMouse moves the mouse to (x, y) in CSS pixels of the viewport, as a
// person's mouse would (the page gets real mousemove events).
func (p *Page) MoveMouse(t testing.TB, x, y float64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.b.ctx, opTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x, y)); err != nil {
		t.Fatalf("move mouse to %.0f,%.0f: %v", x, y, err)
	}
}

// Screenshot writes a PNG of the viewport to path.
func (p *Page) Screenshot(t testing.TB, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.b.ctx, opTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}
