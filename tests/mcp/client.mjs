// Drive `bluebox mcp` with the official MCP TypeScript SDK's client over its stdio transport,
// as an agent would, and print what came back as one JSON report on stdout; the assertions
// are in tests/integration/test_mcp_client.py.
//
//   node client.mjs <bluebox binary> <steps.json>
//
// steps.json: {"args": [...bluebox mcp flags], "steps": [{"label", "tool", "arguments",
// "timeout_ms"?}]}. Each step's outcome is {isError, text} for a tool result, or
// {error: {code, message}} when the call was refused at the protocol level.
import { readFileSync } from "node:fs";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [binary, stepsFile] = process.argv.slice(2);
if (!binary || !stepsFile) {
    console.error("usage: node client.mjs <bluebox binary> <steps.json>");
    process.exit(2);
}
const plan = JSON.parse(readFileSync(stepsFile, "utf8"));

const transport = new StdioClientTransport({
    command: binary,
    args: ["mcp", ...(plan.args ?? [])],
    // the SDK passes only a few "safe" variables by default; bluebox needs BLUEBOX_HOME and
    // the test's podman settings
    env: { ...process.env },
    stderr: "inherit",
});
const client = new Client({ name: "bluebox-test", version: "1.0.0" });
await client.connect(transport);

const report = {
    server: client.getServerVersion(),
    capabilities: client.getServerCapabilities(),
    instructions: client.getInstructions(),
    tools: (await client.listTools()).tools,
    steps: {},
};

for (const step of plan.steps) {
    const started = Date.now();
    let outcome;
    try {
        const r = await client.callTool({ name: step.tool, arguments: step.arguments }, undefined,
            { timeout: step.timeout_ms ?? 60000 });
        outcome = {
            isError: r.isError === true,
            text: r.content.filter((c) => c.type === "text").map((c) => c.text).join(""),
            types: r.content.map((c) => c.type),
        };
    } catch (e) {
        outcome = { error: { code: e.code ?? null, message: String(e.message ?? e) } };
    }
    outcome.ms = Date.now() - started;
    report.steps[step.label] = outcome;
}

await client.close();
process.stdout.write(JSON.stringify(report) + "\n");
