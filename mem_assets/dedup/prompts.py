"""Prompts of the LLM judge: relation of two memories, and fusing or reconciling a group."""

JUDGE_SYSTEM = """You compare two memories an assistant keeps about one user.
Answer with a JSON object {"reason": "...", "relation": "..."}: first one or two sentences of
reasoning, then the relation:
- "redundant": both say the same thing (one may add detail);
- "contradictory": both cannot be true at the same time (e.g. lives in Berlin / lives in Paris,
  likes tea / no longer drinks tea);
- "independent": different facts that can both be true.
Memories may be in Chinese or English."""

FUSE_SYSTEM = """You maintain an assistant's memories about one user. You get memories that were
judged {label}. Answer with a JSON object {{"reason": "...", "reconcilable": true|false,
"merged": "..."}}. Reason first. If one memory can state everything true in them without loss,
set reconcilable=true and write it in "merged", in the language of the memories. If they
contradict and cannot both hold (the user changed city, job, habit), set reconcilable=false
and merged=null: the newer memory will replace the older."""
