package main

import (
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/pricecatalog"
)

// runPrices prints the price catalog (the built-in one, with a LiteLLM file's entries over it
// when -litellm names one) and the price each configured model and expert is billed at: of the
// configuration serve and dev would run (-config, else TOLLGATE_CONFIG, else the built-in one
// `make run` serves). Prices are US dollars per million tokens of each kind; the service tiers
// (OpenAI's flex and priority) are listed by their input, cache-read and output prices (their
// cache writes cost their input price).
func runPrices(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("prices", flag.ContinueOnError)
	litellm := fs.String("litellm", "", "a LiteLLM model_prices_and_context_window.json to list over the built-in catalog")
	configPath := fs.String("config", "", "the configuration whose models' prices are shown (default: TOLLGATE_CONFIG, else the built-in one)")
	day := fs.String("date", time.Now().UTC().Format(time.DateOnly), "the day whose prices are shown (YYYY-MM-DD)")
	if err := parseFlags(fs, args, out); err != nil {
		return err
	}
	if _, err := time.Parse(time.DateOnly, *day); err != nil {
		return withHelp(usageError(fmt.Sprintf("prices: -date %q is not a day (YYYY-MM-DD)", *day)), "tollgate prices -h", "its flags")
	}
	cat := pricecatalog.Builtin()
	if *litellm != "" {
		file, err := pricecatalog.LoadLiteLLMFile(*litellm)
		if err != nil {
			return err
		}
		cat = cat.Overlay(file)
	}
	names := fs.Args()
	if len(names) == 0 {
		names = cat.Names()
	}
	w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ENTRY\tPROVIDER\tSINCE\tINPUT\tCACHE READ\tWRITE 5M\tWRITE 1H\tOUTPUT\tLONG CONTEXT\tSERVICE TIERS (INPUT / CACHE READ / OUTPUT)")
	for _, name := range names {
		e, ok := cat.Lookup(name, *day)
		switch {
		case !ok:
			fmt.Fprintf(w, "%s\t\t\tno entry in force on %s\n", name, *day)
		case e.Err != nil:
			fmt.Fprintf(w, "%s\t%s\t%s\trefused: %v\n", name, e.Provider, orDash(e.Effective), e.Err)
		default:
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", name, e.Provider, orDash(e.Effective), rateColumns(e.Price))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "MODEL\tUPSTREAM\tCATALOG\tINPUT\tCACHE READ\tWRITE 5M\tWRITE 1H\tOUTPUT\tLONG CONTEXT\tSERVICE TIERS (INPUT / CACHE READ / OUTPUT)")
	for _, m := range cfg.Models {
		ups := m.Experts
		if m.Backend != nil {
			ups = []config.Upstream{*m.Backend}
		}
		for _, u := range ups {
			p := m.Price.Resolved()
			if u.Price != nil {
				p = u.Price.Resolved()
			}
			fmt.Fprintf(w, "%s\t%s/%s\t%s\t%s\n", m.ID, u.Provider, u.Model, orDash(strings.TrimSpace(p.Catalog+" "+p.Effective)), rateColumns(p))
		}
	}
	return w.Flush()
}

// rateColumns are a price's rates in dollars per million tokens, tab-separated.
func rateColumns(p price.Price) string {
	r := p.Rates
	cols := []string{dollars(r.Input), dollars(r.CacheRead), dollars(r.CacheWrite5m), dollars(r.CacheWrite1h), dollars(r.Output)}
	if t := p.LongContext; t != nil {
		cols = append(cols, fmt.Sprintf("above %d tokens: %s / %s / %s / %s / %s", t.AboveInputTokens,
			dollars(t.Input), dollars(t.CacheRead), dollars(t.CacheWrite5m), dollars(t.CacheWrite1h), dollars(t.Output)))
	} else {
		cols = append(cols, "-")
	}
	var tiers []string
	for _, name := range slices.Sorted(maps.Keys(p.ServiceTiers)) {
		t := p.ServiceTiers[name]
		tiers = append(tiers, fmt.Sprintf("%s: %s / %s / %s", name, dollars(t.Input), dollars(t.CacheRead), dollars(t.Output)))
	}
	cols = append(cols, orDash(strings.Join(tiers, "; ")))
	return strings.Join(cols, "\t")
}

// dollars is an amount of micro-units as an exact decimal number of dollars, without
// trailing zeros beyond the cents ("3.75", "0.30", "0.025").
func dollars(micros int64) string {
	s := fmt.Sprintf("$%d.%06d", micros/1_000_000, micros%1_000_000)
	for strings.HasSuffix(s, "0") && len(s) > strings.Index(s, ".")+3 {
		s = s[:len(s)-1]
	}
	return s
}
