package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// The agents' defaults (see Agents).
const (
	DefaultAgentModel          = "service-flint"
	DefaultAgentProfile        = "standard"
	DefaultAgentEnvironment    = "datasets"
	DefaultApprovalTTL         = 24 * time.Hour
	DefaultApprovalSweep       = time.Minute
	DefaultSessionSweep        = time.Minute
	DefaultAgentJobTimeout     = 5 * time.Minute
	DefaultAgentRescueAfter    = 10 * time.Minute
	DefaultAgentStepAttempts   = 3
	DefaultAgentWorkers        = 20
	DefaultAgentMaxTurns       = 20
	DefaultAgentMaxSpendMicros = 2_000_000
	DefaultAgentMaxDuration    = time.Hour
	DefaultAgentStopGrace      = 10 * time.Second
	DefaultAgentMaxLiveTails   = 20
)

// Agents configures hosted agents (impl/agent): the resource profiles that bound a session, the
// target environments that name its tools, how long approvals wait, and the job runner's tuning.
// Every field has a default (ApplyDefaults), so the section may be left out.
type Agents struct {
	// DefaultModel is a session's model when the spawn names none (default: service-flint when
	// configured, else the first chat model; see Model).
	DefaultModel string `yaml:"default_model"`
	// DefaultProfile names the profile of a spawn that names none (default "standard").
	DefaultProfile string `yaml:"default_profile"`
	// Profiles are the resource profiles by name.
	Profiles map[string]AgentProfile `yaml:"profiles"`
	// DefaultEnvironment names the target environment of a spawn that names none (default
	// "datasets").
	DefaultEnvironment string `yaml:"default_environment"`
	// Environments are the target environments by name: the tools a session may call.
	Environments map[string]AgentEnvironment `yaml:"environments"`
	// ApprovalTTL is how long an approval stays pending before it expires (default 24 h);
	// ApprovalSweep how often pending approvals are checked for expiry (default 1 min; a
	// resolution checks expiry itself).
	ApprovalTTL   time.Duration `yaml:"approval_ttl"`
	ApprovalSweep time.Duration `yaml:"approval_sweep"`
	// SessionSweep is how often the live sessions whose right to run lapsed with nobody ending
	// them are looked for and ended (default 1 min): a key that reached its expiry, a grant past
	// its lifetime, and a revocation whose own ending of its sessions failed or ran in a
	// process without the agents (impl/agent's sweepLapsed).
	SessionSweep time.Duration `yaml:"session_sweep"`
	// JobTimeout bounds one job (a step: one model call and its tool calls; default 5 min).
	JobTimeout time.Duration `yaml:"job_timeout"`
	// RescueAfter is how long a job may stay running before another process takes it over, as
	// the job of a process that died (default 10 min; longer than JobTimeout).
	RescueAfter time.Duration `yaml:"rescue_after"`
	// StepAttempts is how often a failing step (an upstream outage, a database error) is tried
	// before its session fails with the reason error (default 3).
	StepAttempts int `yaml:"step_attempts"`
	// Workers is how many jobs one process runs at once (default 20).
	Workers int `yaml:"workers"`
	// StopGrace is how long a stopping process lets its running jobs finish before it cancels
	// them (default 10 s); a cancelled step runs again, on any process.
	StopGrace time.Duration `yaml:"stop_grace"`
	// MaxLiveTails bounds the live tails of an account's sessions that one gateway process
	// serves at once (default 20): the events streams, the console's live views and the
	// tail_agent_session calls that wait, together. Each holds a connection for as long as it
	// follows; one more is refused with 429 until one ends (impl/agent Service.Follow).
	MaxLiveTails int `yaml:"max_live_tails"`
}

// AgentProfile bounds a session: model calls, spend and wall-clock time.
type AgentProfile struct {
	MaxTurns       int           `yaml:"max_turns"`
	MaxSpendMicros int64         `yaml:"max_spend_micros"`
	MaxDuration    time.Duration `yaml:"max_duration"`
}

// AgentEnvironment names the tools a session may call: read-only dataset tools of the MCP
// tenant profile and open_ticket. Never the approval-gated actions.
type AgentEnvironment struct {
	Tools []string `yaml:"tools"`
}

// AgentTools are the tools an environment may name.
var AgentTools = []string{"list_storage_datasets", "load_storage_dataset", "query_datasets", "query_schema", "query_data", "open_ticket"}

// ApplyDefaults fills the unset fields, and the "standard" profile and "datasets" environment
// when none is configured.
func (a *Agents) ApplyDefaults() {
	orDefault(&a.DefaultProfile, DefaultAgentProfile)
	if a.Profiles == nil {
		a.Profiles = map[string]AgentProfile{}
	}
	if _, ok := a.Profiles[DefaultAgentProfile]; !ok && len(a.Profiles) == 0 {
		a.Profiles[DefaultAgentProfile] = AgentProfile{}
	}
	for name, p := range a.Profiles {
		orDefault(&p.MaxTurns, DefaultAgentMaxTurns)
		orDefault(&p.MaxSpendMicros, DefaultAgentMaxSpendMicros)
		orDefault(&p.MaxDuration, DefaultAgentMaxDuration)
		a.Profiles[name] = p
	}
	orDefault(&a.DefaultEnvironment, DefaultAgentEnvironment)
	if a.Environments == nil {
		a.Environments = map[string]AgentEnvironment{}
	}
	if len(a.Environments) == 0 {
		a.Environments[DefaultAgentEnvironment] = AgentEnvironment{Tools: slices.Clone(AgentTools)}
	}
	orDefault(&a.ApprovalTTL, DefaultApprovalTTL)
	orDefault(&a.ApprovalSweep, DefaultApprovalSweep)
	orDefault(&a.SessionSweep, DefaultSessionSweep)
	orDefault(&a.JobTimeout, DefaultAgentJobTimeout)
	orDefault(&a.RescueAfter, DefaultAgentRescueAfter)
	orDefault(&a.StepAttempts, DefaultAgentStepAttempts)
	orDefault(&a.Workers, DefaultAgentWorkers)
	orDefault(&a.StopGrace, DefaultAgentStopGrace)
	orDefault(&a.MaxLiveTails, DefaultAgentMaxLiveTails)
}

// Model is a session's model when the spawn names none: DefaultModel, else service-flint when
// it is configured, else the first chat model ("" when there is none).
func (a Agents) Model(c *Config) string {
	if a.DefaultModel != "" {
		return a.DefaultModel
	}
	if m, ok := c.Model(DefaultAgentModel); ok && m.Family == FamilyChat {
		return DefaultAgentModel
	}
	for _, m := range c.Models {
		if m.Family == FamilyChat {
			return m.ID
		}
	}
	return ""
}

// Validate checks the section (after ApplyDefaults) against the configuration's models.
func (a Agents) Validate(c *Config) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("agents: "+format, args...)) }
	if m, ok := c.Model(a.DefaultModel); a.DefaultModel != "" && (!ok || m.Family != FamilyChat) {
		bad("default_model %q is not a configured chat model", a.DefaultModel)
	}
	if _, ok := a.Profiles[a.DefaultProfile]; !ok {
		bad("default_profile %q is not a configured profile", a.DefaultProfile)
	}
	for _, name := range slices.Sorted(maps.Keys(a.Profiles)) {
		p := a.Profiles[name]
		if p.MaxTurns < 1 || p.MaxSpendMicros < 1 || p.MaxDuration < time.Second {
			bad("profile %q: max_turns and max_spend_micros must be positive, max_duration at least 1s", name)
		}
	}
	if _, ok := a.Environments[a.DefaultEnvironment]; !ok {
		bad("default_environment %q is not a configured environment", a.DefaultEnvironment)
	}
	for _, name := range slices.Sorted(maps.Keys(a.Environments)) {
		for _, t := range a.Environments[name].Tools {
			if !slices.Contains(AgentTools, t) {
				bad("environment %q: unknown tool %q (known: %v)", name, t, AgentTools)
			}
		}
	}
	if a.RescueAfter <= a.JobTimeout {
		bad("rescue_after (%s) must be longer than job_timeout (%s)", a.RescueAfter, a.JobTimeout)
	}
	if a.ApprovalTTL <= 0 || a.ApprovalSweep <= 0 || a.SessionSweep <= 0 || a.StepAttempts < 1 || a.Workers < 1 || a.MaxLiveTails < 1 {
		bad("approval_ttl, approval_sweep, session_sweep, step_attempts, workers and max_live_tails must be positive")
	}
	return errors.Join(errs...)
}

// orDefault sets *v to d when *v is its type's zero value (the field was not configured).
func orDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}
