package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/impl/devkit/syncbuf"
)

// Window size of every page, so that screenshots are comparable from run to run.
const (
	windowWidth  = 1280
	windowHeight = 900
)

// startTimeout bounds the start of the browser and the opening of a page.
const startTimeout = 60 * time.Second

var (
	mu sync.Mutex
	// cleanupPromised is set by Begin: someone will call Shutdown.
	cleanupPromised bool
	shared          *browser
	sharedErr       error
)

// Main runs the tests of m, stops the browser that the tests' pages may have
// started and exits with the tests' status. Call it from TestMain. A TestMain
// that must also clean up after other helpers calls Begin and Shutdown.
func Main(m *testing.M) {
	Begin()
	code := m.Run()
	Shutdown()
	os.Exit(code)
}

// Begin declares that the test process will call Shutdown once its tests are
// done, which lets every Page of the process share one browser. Main calls it.
func Begin() {
	mu.Lock()
	defer mu.Unlock()
	cleanupPromised = true
}

// Shutdown stops the shared browser, if one was started, and waits until its
// processes have exited and its profile directory is removed. Main calls it.
func Shutdown() {
	mu.Lock()
	defer mu.Unlock()
	if shared != nil {
		shared.stop()
	}
	shared, sharedErr = nil, nil
}

// browser is one Chromium process with its allocator.
type browser struct {
	// ctx is the browser's first chromedp context: new pages are opened as
	// children of it, each in a new browser context.
	ctx         context.Context
	cancel      context.CancelFunc
	allocCancel context.CancelFunc
	out         *syncbuf.Buffer
}

// stop closes the browser and waits for its processes and profile to go.
func (b *browser) stop() {
	b.cancel()
	b.allocCancel()
}

// acquire returns a browser for t: the shared one when Begin was called, else
// one that lives until t's cleanup. It skips t when Chromium is not
// installed, or fails it then under CI=true.
func acquire(t testing.TB) *browser {
	t.Helper()
	path, err := chromiumPath()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("browsertest: %v; the browser tests need it under CI=true (.ci/run installs it)", err)
		}
		t.Skipf("browsertest: %v; install it (apt-get install chromium) to run the browser tests", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !cleanupPromised {
		b, err := start(path)
		if err != nil {
			t.Fatalf("browsertest: %v", err)
		}
		t.Cleanup(b.stop)
		return b
	}
	if shared == nil && sharedErr == nil {
		shared, sharedErr = start(path)
	}
	if sharedErr != nil {
		t.Fatalf("browsertest: %v", sharedErr)
	}
	return shared
}

// chromiumPath finds Debian's chromium on PATH.
func chromiumPath() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("chromium is not installed (no chromium on PATH)")
}

// allocatorOptions are the flags the browser starts with. See the package
// documentation for why each is there.
func allocatorOptions(path string, out *syncbuf.Buffer) []chromedp.ExecAllocatorOption {
	return append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		// Chromium refuses to start as root with its sandbox (containers, CI).
		chromedp.Flag("no-sandbox", os.Getuid() == 0),
		chromedp.DisableGPU,
		chromedp.WindowSize(windowWidth, windowHeight),
		chromedp.Flag("lang", "en-US"),
		// Nothing calls home: the network here is closed, and a refused
		// or hanging background connection only slows the browser down.
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-pings", true),
		chromedp.Flag("disable-features", "Translate,BlinkGenPropertyTrees,OptimizationHints,MediaRouter,"+
			"DialMediaRouteProvider,AutofillServerCommunication,CertificateTransparencyComponentUpdater,"+
			"HttpsUpgrades,HttpsFirstBalancedModeAutoEnable,PrivacySandboxSettings4"),
		chromedp.CombinedOutput(out),
	)
}

// start starts Chromium from path and waits until it answers.
func start(path string) (*browser, error) {
	out := &syncbuf.Buffer{}
	allocCtx, allocCancel := chromedp.NewExecAllocator(context.Background(), allocatorOptions(path, out)...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	b := &browser{ctx: ctx, cancel: cancel, allocCancel: allocCancel, out: out}
	// The first run starts the browser; its context must have no deadline,
	// since the browser lives as long as the context of that first run.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			b.stop()
			return nil, fmt.Errorf("start %s: %v\n%s", path, err, out.String())
		}
	case <-time.After(startTimeout):
		b.stop()
		<-started
		return nil, fmt.Errorf("start %s: no answer within %s\n%s", path, startTimeout, out.String())
	}
	return b, nil
}
