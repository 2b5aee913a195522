// The official AG-UI client (@ag-ui/client's HttpAgent) against a RobotLab AG-UI endpoint, for
// tests/example_project/test_agui.py. HttpAgent checks every event as it arrives (verifyEvents): a stream that breaks
// the protocol's rules rejects the run. Prints one JSON object: each scenario's events, messages and outcome.
import { HttpAgent } from "@ag-ui/client";

const base = process.env.AGUI_URL;
const headers = { Authorization: `Bearer ${process.env.ROBOTLAB_TOKEN}` };

async function run(agent, parameters = {}) {
  const events = [];
  const { result } = await agent.runAgent(parameters, { onEvent: ({ event }) => { events.push(event); } });
  return { events, result, pendingInterrupts: agent.pendingInterrupts };
}

function agentFor(name, threadId, text) {
  const agent = new HttpAgent({ url: `${base}/${name}`, headers, threadId });
  agent.messages.push({ id: `${threadId}-user`, role: "user", content: text });
  return agent;
}

const out = {};
const chat = agentFor("chat", "node-chat", "What is 12 * 7?");
out.tool_round = { ...(await run(chat)), messages: chat.messages };

const support = agentFor("support", "node-support", "I was charged twice on my invoice");
out.network = { ...(await run(support)), messages: support.messages };

const concierge = agentFor("concierge", "node-concierge", "Ask the user which plan suits them");
out.parked = await run(concierge);
const [parked] = concierge.pendingInterrupts;
out.resumed = {
  ...(await run(concierge, { resume: [{ interruptId: parked.id, status: "resolved", payload: "the pro plan" }] })),
  messages: concierge.messages,
};
console.log(JSON.stringify(out));
