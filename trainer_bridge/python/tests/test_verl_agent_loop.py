"""kforge.trainers.verl.KForgeAgentLoop driven as verl drives an agent loop
(volcengine/verl at b178a3c, 0.8.0.dev: verl/experimental/agent_loop/
agent_loop.py, tool_agent_loop.py, tool_parser.py): constructed per sample
with (trainer_config, server_manager, tokenizer, processor, dataset_cls,
dataset_config), ``await run(sampling_params, **row)``; the server manager
generates from token ids and returns TokenOutput (token_ids, log_probs); the
output's response_ids/response_mask/response_logprobs/reward_score are
checked as verl's postprocessing reads them. The trainer side here: a byte
tokenizer with a ChatML template and a scripted policy that emits Hermes
tool calls. Against a real ``kforge serve``."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from conftest import EXAMPLES, SMALL_AFFINE_ID, source, start_server

from kforge.trainers.verl import KForgeAgentLoop, parse_tool_call

AFFINE = EXAMPLES / "affine_relu6"
FAST, WRONG = source(AFFINE / "cpu" / "fast.cpp"), source(AFFINE / "cpu" / "wrong.cpp")


class ByteChatTokenizer:
    """A tokenizer whose tokens are UTF-8 bytes, with a ChatML template that
    adds a default system prompt, as Qwen's does."""

    def render(self, messages: List[Dict[str, Any]], tools: Optional[List[Dict[str, Any]]], gen: bool) -> str:
        out = ""
        if not messages or messages[0].get("role") != "system":
            out += "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        for m in messages:
            content = m.get("content", "")
            if m.get("role") == "system" and tools:
                content += "\n# Tools\n" + json.dumps(tools)
            out += f"<|im_start|>{m['role']}\n{content}<|im_end|>\n"
        return out + ("<|im_start|>assistant\n" if gen else "")

    def apply_chat_template(self, messages: List[Dict[str, Any]], tools: Any = None, add_generation_prompt: bool = False,
                            tokenize: bool = True, **_: Any) -> Any:
        text = self.render(messages, tools, add_generation_prompt)
        return list(text.encode()) if tokenize else text

    def encode(self, text: str) -> List[int]:
        return list(text.encode())

    def decode(self, ids: List[int]) -> str:
        return bytes(ids).decode(errors="replace")


@dataclass
class TokenOutput:  # verl/workers/rollout/replica.py
    token_ids: List[int]
    log_probs: Optional[List[float]] = None
    stop_reason: Optional[str] = None
    num_preempted: Optional[int] = None
    routed_experts: Any = None


class ScriptedServer:
    """AsyncLLMServerManager.generate: answers turn k with script[k]."""

    def __init__(self, script: List[str], logprobs: bool = True) -> None:
        self.script = script
        self.logprobs = logprobs
        self.prompts: List[List[int]] = []

    async def generate(self, request_id: str, *, prompt_ids: List[int], sampling_params: Dict[str, Any],
                       image_data: Any = None, video_data: Any = None) -> TokenOutput:
        self.prompts.append(list(prompt_ids))
        text = self.script[min(len(self.prompts) - 1, len(self.script) - 1)]
        ids = list(text.encode())
        # verl's calculate_log_probs False: the server returns none.
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids) if self.logprobs else None,
                           stop_reason="completed")


def hermes(name: str, **arguments: Any) -> str:
    return "I will " + name + ".<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def config(response_length: int = 1 << 20, turns: int = 6) -> Dict[str, Any]:
    return {"actor_rollout_ref": {"rollout": {"response_length": response_length,
                                              "multi_turn": {"max_assistant_turns": turns}}}}


def make_loop(endpoint: str, script: List[str], logprobs: bool = True, **cfg: Any) -> Any:
    server = ScriptedServer(script, logprobs)
    tok = ByteChatTokenizer()
    loop = KForgeAgentLoop(config(**cfg), server, tok, None, None, {}, kforge_endpoint=endpoint, kforge_timeout_s=600)
    return loop, server, tok


def run_loop(endpoint: str, script: List[str], row: Dict[str, Any], logprobs: bool = True, **cfg: Any) -> Any:
    loop, server, tok = make_loop(endpoint, script, logprobs, **cfg)
    out = asyncio.new_event_loop().run_until_complete(loop.run({"temperature": 1.0}, **row))
    return out, server, tok


def segments(mask: List[int]) -> List[tuple]:
    out: List[tuple] = []
    for i, m in enumerate(mask):
        if out and out[-1][0] == m:
            out[-1] = (m, out[-1][1], i + 1)
        else:
            out.append((m, i, i + 1))
    return out


def test_an_episode_as_verl_sees_it(small_task_server: Any) -> None:
    script = [hermes("compile", source=FAST), hermes("submit", source=FAST)]
    row = {"raw_prompt": [{"role": "user", "content": "ignored: the environment owns the prompt"}],
           "extra_info": {"task_id": SMALL_AFFINE_ID, "seed": 4}}
    out, server, tok = run_loop(small_task_server.endpoint, script, row)

    prompt = tok.decode(out.prompt_ids)
    assert "kf_forward" in prompt and '"submit"' in prompt and prompt.endswith("<|im_start|>assistant\n")
    assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs)
    # Model tokens (mask 1) are exactly what the server generated, with its
    # logprobs; tool tokens (mask 0) are the observation, logprob 0.
    segs = segments(out.response_mask)
    assert [s[0] for s in segs] == [1, 0, 1], segs
    first, tool, second = segs
    assert tok.decode(out.response_ids[first[1]:first[2]]) == script[0]
    assert tok.decode(out.response_ids[second[1]:second[2]]) == script[1]
    assert all(lp == -0.5 for lp in out.response_logprobs[first[1]:first[2]])
    tool_text = tok.decode(out.response_ids[tool[1]:tool[2]])
    assert tool_text.startswith("<|im_start|>tool\n[compile") and tool_text.endswith("<|im_start|>assistant\n")
    assert "You are a helpful assistant" not in tool_text  # verl's remove_system_prompt
    assert all(lp == 0.0 for lp in out.response_logprobs[tool[1]:tool[2]])
    # The second generation saw prompt + first answer + tool message.
    assert server.prompts[1] == out.prompt_ids + out.response_ids[:tool[2]]
    assert out.reward_score > 0 and out.extra_fields["kforge_outcome"] == "correct"
    assert out.extra_fields["kforge_stop_reason"] == "submitted" and out.extra_fields["kforge_seed"] == 4
    assert abs(sum(out.extra_fields["kforge_rewards"]) - out.reward_score) < 1e-12
    assert out.num_turns == 4  # verl's count: assistant turns + tool turns + 1
    assert set(out.metrics) == {"generate_sequences", "tool_calls", "num_preempted"}
    assert out.metrics["tool_calls"] > 0


def test_verl_rows_limits_and_mistakes(small_task_server: Any) -> None:
    # A row of kforge.export's verl format; a wrong kernel: negative reward.
    row = {"raw_prompt": [], "reward_model": {"style": "rule", "ground_truth": SMALL_AFFINE_ID}}
    wrong, _, _ = run_loop(small_task_server.endpoint, [hermes("submit", source=WRONG)], row)
    assert wrong.reward_score < 0 and wrong.extra_fields["kforge_outcome"] == "wrong"
    # The turn limit, checked as verl's loop does before the turn's tool call
    # runs: the response ends with the model's tokens; the episode is ended
    # by the environment's rule and its compiled solution scored.
    out, _, tok = run_loop(small_task_server.endpoint, [hermes("compile", source=FAST), hermes("verify", source=WRONG)],
                           row, turns=2)
    assert out.extra_fields["kforge_stop_reason"] == "turn_limit"
    assert out.extra_fields["kforge_outcome"] == "correct" and out.extra_fields["kforge_correct"] is True
    assert out.reward_score > 0 and segments(out.response_mask)[-1][0] == 1
    assert tok.decode(out.response_ids).endswith("</tool_call>")
    # The response length cuts the episode: nothing past it is returned.
    out, _, _ = run_loop(small_task_server.endpoint, [hermes("submit", source=FAST)], row, response_length=100)
    assert len(out.response_ids) == len(out.response_mask) == 100 and all(m == 1 for m in out.response_mask)
    assert out.extra_fields["kforge_stop_reason"] == "context_length"
    # Without logprobs from the server (calculate_log_probs: False), None as verl's own loop.
    out, _, _ = run_loop(small_task_server.endpoint, [hermes("compile", source=FAST), "done"], row, logprobs=False)
    assert out.response_logprobs is None and out.extra_fields["kforge_stop_reason"] == "policy_stopped"


def test_abstaining_never_beats_a_failed_attempt(small_task_server: Any) -> None:
    row = {"extra_info": {"task_id": SMALL_AFFINE_ID, "seed": 5}}
    scripts = {"abstain": ["I would rather not."], "wrong_submit": [hermes("submit", source=WRONG)],
               "compile_error": [hermes("compile", source="not C++"), "done"],
               "wrong_verify": [hermes("verify", source=WRONG), "done"]}
    returns = {name: run_loop(small_task_server.endpoint, script, row)[0].reward_score
               for name, script in scripts.items()}
    assert all(returns["abstain"] <= r for r in returns.values()), returns


def test_more_samples_than_envs_wait_for_one() -> None:
    server = start_server("--tasks", str(EXAMPLES), envs=2)
    try:
        row = {"extra_info": {"task_id": "example/affine_relu6"}}

        async def batch() -> List[Any]:
            loops = [make_loop(server.endpoint, [hermes("compile", source=FAST), "done"])[0] for _ in range(5)]
            return await asyncio.gather(*(loop.run({}, **row) for loop in loops))

        outs = asyncio.new_event_loop().run_until_complete(batch())
        assert [o.extra_fields["kforge_outcome"] for o in outs] == ["correct"] * 5
    finally:
        assert server.stop() == 0


def test_parse_tool_call() -> None:
    assert parse_tool_call("x") is None
    assert parse_tool_call('<tool_call>{"name": "submit", "arguments": {"source": "s"}}</tool_call>') == {
        "name": "submit", "arguments": '{"source": "s"}'}
    assert parse_tool_call("<tool_call>{broken</tool_call>")["name"] == "invalid"
