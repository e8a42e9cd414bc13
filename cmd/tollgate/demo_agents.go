package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/dataset"
	"github.com/tollgate/tollgate/impl/store"
)

// What dev gives the demo account for the agents walk-through: an agent slot, and a small CSV
// dataset when the account has none.
const (
	demoSlot    = "demo"
	demoDataset = "sales"
	demoSales   = `region,product,units,amount
EU,widget,12,240.00
EU,gadget,3,135.00
US,widget,20,400.00
US,gadget,7,315.00
APAC,widget,9,180.00
APAC,gadget,11,495.00
`
)

// seedDemoAgents gives the demo account the slot demoSlot (unless it has it) and the dataset
// demoDataset (unless it has a dataset).
func seedDemoAgents(ctx context.Context, st *store.Store, agents *agent.Service, datasets *dataset.Service) error {
	acct, err := st.GetAccountByName(ctx, "demo")
	if err != nil {
		return err
	}
	if err := agents.AssignSlot(ctx, acct.ID, demoSlot); err != nil {
		if _, exists := errors.AsType[*agent.ConflictError](err); !exists {
			return fmt.Errorf("demo slot: %w", err)
		}
	}
	list, err := datasets.ListStorage(ctx, acct.ID)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		if _, err := datasets.Put(ctx, acct.ID, demoDataset, dataset.CSV, strings.NewReader(demoSales)); err != nil {
			return fmt.Errorf("demo dataset: %w", err)
		}
	}
	return nil
}

// demoAgentPrompt is the walk-through's prompt: a question the simulator answers as an agent's
// model would, loading the dataset and querying it with the dataset tools.
const demoAgentPrompt = `Which region sold the most units? [[sim script: call load_storage_dataset {\"name\":\"sales\"}; call query_data {\"dataset\":\"sales\",\"sql\":\"SELECT region, SUM(units) AS units FROM sales GROUP BY region ORDER BY units DESC\"}]]`

// demoAgentRealPrompt is the walk-through's prompt for real models, which read no
// [[sim script: …]] and choose the tools themselves.
const demoAgentRealPrompt = `Which region sold the most units? The dataset ` + demoDataset + ` has a row per region and product.`

// demoAgentBanner is the banner's agents part: the slot, and commands that spawn a session on
// it and follow its events. Its URLs are named as devBanner's are (devBaseURL). simulated says
// whether the simulator plays the agent's model: only then does the prompt carry the script
// that plays it (newcomer trial finding 2: on real providers the banner offered a script no
// model follows).
func demoAgentBanner(addr string, simulated bool) string {
	base := devBaseURL(addr)
	prompt := demoAgentPrompt
	if !simulated {
		prompt = demoAgentRealPrompt
	}
	var b strings.Builder
	b.WriteString("  Agents: the demo account has the agent slot '" + demoSlot + "' and the dataset '" + demoDataset + "'.\n")
	if !simulated {
		b.WriteString("  (The README's scripted walk-through, with [[sim script: …]], needs the simulator;\n")
		b.WriteString("   on real providers the model answers this prompt itself, and bills for it.)\n")
	}
	b.WriteString("  curl -s " + base + "/v1/agents -H \"Authorization: Bearer $TOLLGATE_API_KEY\" \\\n")
	b.WriteString("    -d '{\"slot\":\"" + demoSlot + "\",\"prompt\":\"" + prompt + "\"}'\n")
	b.WriteString("  curl -sN " + base + "/v1/agents/" + demoSlot + "/events -H \"Authorization: Bearer $TOLLGATE_API_KEY\"\n")
	b.WriteString("  curl -s " + base + "/v1/agents -H \"Authorization: Bearer $TOLLGATE_API_KEY\"\n\n")
	return b.String()
}
