package main

import (
	"context"
	"errors"
	"fmt"
	"net"
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

// demoAgentBanner is the banner's agents part: the slot, and commands that spawn a session on
// it and follow its events.
func demoAgentBanner(addr string) string {
	host := addr
	if h, port, err := net.SplitHostPort(addr); err == nil && (h == "::" || h == "0.0.0.0" || h == "") {
		host = "localhost:" + port
	}
	base := "http://" + host
	var b strings.Builder
	b.WriteString("  Agents: the demo account has the agent slot '" + demoSlot + "' and the dataset '" + demoDataset + "'.\n")
	b.WriteString("  curl -s " + base + "/v1/agents -H \"Authorization: Bearer $TOLLGATE_API_KEY\" \\\n")
	b.WriteString("    -d '{\"slot\":\"" + demoSlot + "\",\"prompt\":\"" + demoAgentPrompt + "\"}'\n")
	b.WriteString("  curl -sN " + base + "/v1/agents/" + demoSlot + "/events -H \"Authorization: Bearer $TOLLGATE_API_KEY\"\n")
	b.WriteString("  curl -s " + base + "/v1/agents -H \"Authorization: Bearer $TOLLGATE_API_KEY\"\n\n")
	return b.String()
}
