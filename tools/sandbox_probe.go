package tools

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"
)

// probeProgram prints what the sandbox must have taken from a program:
// its user id and its effective capabilities.
const probeProgram = `import os
caps = [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff:")]
print("uid", os.getuid(), "caps", caps[0])`

// probeWant is probeProgram's output in a sandbox that works.
const probeWant = "uid " + sandboxUID + " caps 0000000000000000"

// probeTimeout bounds the probe run, python's first start included.
const probeTimeout = 60 * time.Second

// probes holds each probed sandbox's outcome, once per process: koe checks
// the sandbox when it reads its configuration, and builds the tool again
// for every session.
var probes sync.Map // probeKey → *probeResult

type probeKey struct {
	sandbox  string
	settings PythonSettings
	uid, gid int
	euid     int
}

type probeResult struct {
	done chan struct{} // closed once err is set
	err  error
}

// probe runs a program in the sandbox as it is configured and refuses
// the tool where the sandbox does not start or leaves the program a user
// id or capabilities it must not have. It never falls back to a weaker
// sandbox: the operator chooses tools.python.unsandboxed.
func (p *python) probe() error {
	key := probeKey{sandbox: p.sandbox, settings: p.settings, uid: p.uid, gid: p.gid, euid: os.Geteuid()}
	v, loaded := probes.LoadOrStore(key, &probeResult{done: make(chan struct{})})
	r := v.(*probeResult)
	if !loaded {
		r.err = p.runProbe()
		close(r.done)
	}
	<-r.done
	return r.err
}

func (p *python) runProbe() error {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	got, err := p.run(ctx, probeProgram)
	if err != nil {
		return fmt.Errorf("%w. The sandbox needs bubblewrap, the interpreter (tools.python.command) under /usr, "+
			"and user namespaces: sysctl user.max_user_namespaces above 0, kernel.unprivileged_userns_clone=1 and "+
			"kernel.apparmor_restrict_unprivileged_userns=0 where they exist, and in a container a seccomp profile "+
			"that allows them; or set tools.python.unsandboxed: true to run code without it", err)
	}
	if got != probeWant {
		return fmt.Errorf("the python sandbox does not hold its program as it must (it showed %q where %q was due): "+
			"the tool will not run code in it; set tools.python.unsandboxed: true to run it without one", clipTo(got, 200), probeWant)
	}
	return nil
}
