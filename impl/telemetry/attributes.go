package telemetry

import "go.opentelemetry.io/otel/attribute"

// Attribute keys of the GenAI semantic conventions that tollgate's spans carry.
const (
	GenAIOperationName        = attribute.Key("gen_ai.operation.name")
	GenAIProviderName         = attribute.Key("gen_ai.provider.name")
	GenAIRequestModel         = attribute.Key("gen_ai.request.model")
	GenAIResponseModel        = attribute.Key("gen_ai.response.model")
	GenAIRequestMaxTokens     = attribute.Key("gen_ai.request.max_tokens")
	GenAIRequestChoiceCount   = attribute.Key("gen_ai.request.choice.count")
	GenAIRequestStream        = attribute.Key("gen_ai.request.stream")
	GenAIRequestSeed          = attribute.Key("gen_ai.request.seed")
	GenAIOutputType           = attribute.Key("gen_ai.output.type")
	GenAIResponseTimeToFirst  = attribute.Key("gen_ai.response.time_to_first_chunk")
	GenAIUsageInputTokens     = attribute.Key("gen_ai.usage.input_tokens")
	GenAIUsageOutputTokens    = attribute.Key("gen_ai.usage.output_tokens")
	GenAIUsageReasoning       = attribute.Key("gen_ai.usage.reasoning.output_tokens")
	GenAIUsageCacheRead       = attribute.Key("gen_ai.usage.cache_read.input_tokens")
	GenAIUsageCacheCreation   = attribute.Key("gen_ai.usage.cache_creation.input_tokens")
	GenAIResponseFinishReason = attribute.Key("gen_ai.response.finish_reasons")
	GenAIResponseID           = attribute.Key("gen_ai.response.id")
	GenAIToolName             = attribute.Key("gen_ai.tool.name")
	GenAIToolType             = attribute.Key("gen_ai.tool.type")
	GenAIToolDescription      = attribute.Key("gen_ai.tool.description")
	GenAIToolCallID           = attribute.Key("gen_ai.tool.call.id")
	GenAIAgentID              = attribute.Key("gen_ai.agent.id")
	GenAIAgentName            = attribute.Key("gen_ai.agent.name")
	GenAIConversationID       = attribute.Key("gen_ai.conversation.id")
	ErrorType                 = attribute.Key("error.type")
	// ServerAddress and ServerPort name the provider an upstream try calls (the conventions'
	// recommended attributes of a GenAI client span).
	ServerAddress = attribute.Key("server.address")
	ServerPort    = attribute.Key("server.port")
	// HTTPResponseStatusCode is the upstream's answer status on a try's span.
	HTTPResponseStatusCode = attribute.Key("http.response.status_code")
)

// Values of gen_ai.operation.name.
const (
	OperationChat        = "chat"
	OperationExecuteTool = "execute_tool"
	OperationInvokeAgent = "invoke_agent"
)

// ProviderTollgate is the gen_ai.provider.name of the gateway's own agents' invoke_agent spans,
// which the conventions require: the agent is tollgate's, run in its process, and its model a
// gateway model that may be routed to experts of several providers, so no upstream's name fits
// (a custom value, as the conventions allow where no well-known one applies). Each model call of
// the agent names its upstream's provider on its own try's span.
const ProviderTollgate = "tollgate"

// ToolTypeFunction is the gen_ai.tool.type of the tools tollgate runs (MCP tools and the
// agents' tools alike: functions the model calls with JSON arguments).
const ToolTypeFunction = "function"

// Attribute keys of tollgate's own (tollgate.*).
const (
	// AttrAccount is the caller's account id; AttrKey its API key's id (never the secret).
	AttrAccount = attribute.Key("tollgate.account.id")
	AttrKey     = attribute.Key("tollgate.key.id")
	// AttrRequestID is the request's x-request-id.
	AttrRequestID = attribute.Key("tollgate.request.id")
	// AttrErrorType, AttrErrorCode and AttrErrorParam say why a request was refused, on its
	// server span: the error envelope's type and code, and the field it names.
	AttrErrorType  = attribute.Key("tollgate.error.type")
	AttrErrorCode  = attribute.Key("tollgate.error.code")
	AttrErrorParam = attribute.Key("tollgate.error.param")
	// AttrAgentSessionID names an agent session: on its invoke_agent span and steps, and on the
	// server span of the request that spawned it or messaged it (trial h8 D17: nothing led there).
	AttrAgentSessionID = attribute.Key("tollgate.agent.session_id")
	// AttrModel is the gateway model asked for (from the catalog).
	AttrModel = attribute.Key("tollgate.model")
	// AttrExpert names the upstream of an attempt ("provider/model").
	AttrExpert = attribute.Key("tollgate.expert")
	// AttrUpstreamAttempts counts the tries of one expert (its retries included).
	AttrUpstreamAttempts = attribute.Key("tollgate.upstream.attempts")
	// AttrReservationMicros is the worst-case cost reserved before the upstream call, in
	// micro-units; AttrAdmission the outcome (AdmissionAdmitted, AdmissionRefused, ...).
	AttrReservationMicros = attribute.Key("tollgate.reservation.micros")
	AttrAdmission         = attribute.Key("tollgate.admission.outcome")
	// AttrCostMicros is the settled cost in micro-units; AttrSettlementStatus the usage
	// record's status ("ok", "client_disconnected", ...).
	AttrCostMicros       = attribute.Key("tollgate.cost.micros")
	AttrSettlementStatus = attribute.Key("tollgate.settlement.status")
	// AttrAuthOutcome is the authentication's outcome ("ok" or the refusal's reason).
	AttrAuthOutcome = attribute.Key("tollgate.auth.outcome")
)

// Admission outcomes (AttrAdmission): admitted; degraded, served on credit while the
// database is unreachable; refused (402, or the key's cap); unavailable (503).
const (
	AdmissionAdmitted    = "admitted"
	AdmissionDegraded    = "degraded"
	AdmissionRefused     = "refused"
	AdmissionUnavailable = "unavailable"
)

// Captured content (only for accounts that opted in): the GenAI conventions' attributes, set on
// the answering attempt's span as structured values (slices of maps) in the conventions' input
// and output message schemas, as the conventions ask where the SDK has such values (Go's now
// has; JSON text is only their fallback for SDKs without). Before, the input was the raw
// request body and the output a bare text in an event of its own name (trial h8 D3), and then
// JSON text.
const (
	AttrInput              = attribute.Key("gen_ai.input.messages")
	AttrOutput             = attribute.Key("gen_ai.output.messages")
	AttrSystemInstructions = attribute.Key("gen_ai.system_instructions")
)
