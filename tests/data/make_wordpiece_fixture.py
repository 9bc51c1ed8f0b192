#!/usr/bin/env python3
"""Makes tests/data/wordpiece_fixture.json: varied texts and the ids the reference tokenizer, the
`tokenizers` package from PyPI (Hugging Face's Rust BertNormalizer + BertPreTokenizer + WordPiece +
TemplateProcessing), gives them with all-MiniLM-L6-v2's tokenizer.json. The oracle of
tests/model/test_wordpiece.cpp.

    MODEL=$(bash scripts/fetch_model.sh)
    .venv-bench/bin/python -m pip install tokenizers      # 0.23.3 made the committed file
    .venv-bench/bin/python tests/data/make_wordpiece_fixture.py "$MODEL" tests/data/wordpiece_fixture.json

Truncation is the tokenizer.json's own (LongestFirst at 128 tokens, [CLS] and [SEP] included);
padding is switched off. Texts are deterministic (a fixed random seed for the generated ones).
"""
import hashlib
import json
import random
import sys

import tokenizers

model_dir, out = sys.argv[1], sys.argv[2]
tok = tokenizers.Tokenizer.from_file(f"{model_dir}/tokenizer.json")
tok.no_padding()
max_length = tok.truncation["max_length"]

texts = [
    # the seed's domain, English
    "Stop decision: pressure anomaly on pump P-101, return condition not met.",
    "Hold decision after the vibration log showed 12.5 mm/s at 03:40 UTC.",
    "Shutdown order issued; restart approval pending the lock check (LOTO).",
    "Temperature rise of +35°C in bearing #2 -> restart condition: below 80 °C for 30 min.",
    "The operator stopped line 3 because the discharge pressure exceeded 8.4 bar.",
    "Return to service only when the seal is replaced and the pressure holds for 2 h.",
    "exception clause: if the backup compressor fails, branch to manual control.",
    "Pressure anomaly!!! Vibration??? Decision... pending",
    "stop_decision hold_decision shutdown_order restart_approval",
    "pressure_anomaly vibration_log lock_check temperature_rise",
    "return_condition restart_condition exception_clause branch_condition",
    "Valve V-12 closed at 14:02; PT-7 reads 3,450 kPa (±0.5 %).",
    "Don't restart until the supervisor's sign-off is logged.",
    "e-mail: ops@example.com, URL: https://example.com/reports?id=42&lang=en",
    "Costs: $1,200.50 / €980 / £870 / ¥130000 — approved.",
    "1234567890 3.14159 2.71828e-10 0x1F 1/2 50% 007",
    "UNITED STATES OF AMERICA vs. united states of america",
    "CamelCaseWordsAreSplitIntoPieces and snake_case_words_too",
    "",
    " ",
    "   leading and trailing spaces   ",
    "a",
    "A.B.C.D.E.",
    "(nested [brackets {and <angles>}])",
    "quotes \"double\" 'single' `back` «guillemets» „low“ ‘curly’",
    "math: a+b=c, x^2 <= y, a|b, ~not, a*b, 5 > 3, under_score",
    "dashes - – — ‒ ― and ellipsis …",
    "tabs\tand\nnewlines\r\nand\u000bvertical\u000cform feed",
    "control chars \u0001\u0002\u0003 and DEL \u007f and NUL \u0000 inside",
    "zero width\u200bspace and joiner\u200dhere, soft\u00adhyphen",
    "non-breaking\u00a0space, em\u2003space, ideographic\u3000space",
    "replacement char \ufffd inside",
    "line\u2028separator and paragraph\u2029separator",
    # accents and other Latin-script languages
    "Café, naïve, résumé, coöperate, façade, jalapeño, Zürich, São Paulo",
    "Élève à l'école où l'été dure; ça va très bien, merci.",
    "Ärger über Öl und Übermaß: Straße, Maß, Fußgänger",
    "El niño pidió una canción en la estación; ¿qué pasó? ¡Olé!",
    "Tiếng Việt có nhiều dấu: người, được, những, thương",
    "Dvořák, Łódź, Kraków, Ångström, Ørsted, Þórr, Æsir, œuvre",
    "İstanbul, ığdır, ŞEKER, çiçek, Ğ",
    "ﬁnancial ﬂow (ligatures) and ﬀ",
    "ÅÄÖ åäö ÑÇ ñç",
    "decomposed e\u0301 vs precomposed é and a\u0308\u0301 stack",
    # Greek, Cyrillic, Arabic, Hebrew, Devanagari, Thai
    "Ελληνικά: Σίσυφος, ΟΔΥΣΣΕΥΣ, ψυχή",
    "Русский текст: Привет, мир! Ёлка и ёж.",
    "العربية: مرحبا بالعالم",
    "עברית: שלום עולם",
    "हिन्दी: नमस्ते दुनिया",
    "ภาษาไทย สวัสดีชาวโลก",
    # CJK and Korean (the seed's tokens are Korean)
    "정지결정 압력이상 복귀조건",
    "보류결정 진동기록 재가동조건",
    "차단작업 잠금확인 예외조건",
    "재가동승인 온도상승 분기조건",
    "압력 이상으로 정지 결정을 내렸다. 복귀 조건: 압력 안정.",
    "한국어와 English가 섞인 report입니다",
    "中文测试：压力异常，停止决定。",
    "日本語のテキスト：圧力異常で停止、復帰条件あり。",
    "漢字とひらがなとカタカナ",
    "互換漢字 豈 更 車 (CJK compatibility ideographs)",
    "𠀀𠀁 extension B ideographs",
    "fullwidth ＡＢＣ１２３！ and halfwidth ｶﾀｶﾅ",
    # emojis and symbols
    "Pump down 😀😃 fire 🔥 ok 👍 heart ❤️ flag 🇰🇷",
    "family 👨‍👩‍👧 skin 👍🏽 keycap 1️⃣",
    "arrows → ← ↑ ↓ ⇒ and ✓ ✗ ★ ☆ ♥",
    "math symbols ∑ ∫ √ ∞ ≈ ≠ ≤ ≥ ∂ ∆ µ Ω",
    "currency ₩ ₹ ₽ ₿ ¢",
    "superscripts x² y³ ½ ¼ ¾ and subscripts H₂O",
    "degrees 25°C 77°F and primes 5′ 10″",
    "bullets • ◦ ▪ and section § ¶ © ® ™",
    # long words
    "a" * 99,
    "b" * 100,
    "c" * 101,
    "pneumonoultramicroscopicsilicovolcanoconiosis",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "Donaudampfschifffahrtselektrizitätenhauptbetriebswerkbauunterbeamtengesellschaft",
    "x" * 150 + " short",
    "é" * 100 + " " + "é" * 101,
    "word" * 30,
    "ab" * 60 + ", then more",
    "pressure" + "-" * 50 + "anomaly",
    # truncation: longer than 128 tokens
    " ".join(["pressure anomaly on the pump"] * 40),
    " ".join(str(i) for i in range(300)),
    "정지결정 " * 80,
]

# Generated texts: random mixes of words, numbers, punctuation and scripts.
rng = random.Random(20261130)
words = ["stop", "decision", "pressure", "anomaly", "return", "condition", "pump", "valve", "seal",
         "restart", "approval", "vibration", "log", "lock", "check", "temperature", "rise", "bar",
         "kPa", "Operator", "SHIFT", "handover", "bearing", "compressor", "turbine", "정지", "결정",
         "압력", "이상", "복귀", "조건", "café", "naïve", "Zürich", "Ωmega", "μ", "东京", "😀", "🔥",
         "l'usine", "o'clock", "can't", "e.g.", "i.e.", "N/A", "x86-64", "C++", "#7", "@home",
         "unbelievably", "overpressurization", "recalibration", "deenergized", "ISO-9001"]
punct = [".", ",", ";", ":", "!", "?", "-", "(", ")", "/", "\"", "'", "…", "—", "%", "&", "*", "+"]
for i in range(170):
    n = rng.randint(1, 25)
    parts = []
    for _ in range(n):
        r = rng.random()
        if r < 0.6:
            w = rng.choice(words)
            if rng.random() < 0.2:
                w = w.upper()
            elif rng.random() < 0.2:
                w = w.capitalize()
            parts.append(w)
        elif r < 0.75:
            parts.append(str(rng.choice([rng.randint(0, 99), rng.randint(100, 99999), round(rng.uniform(0, 1000), 2)])))
        elif r < 0.9:
            parts.append(rng.choice(punct))
        else:
            parts.append("".join(chr(rng.choice([rng.randint(0x41, 0x7a), rng.randint(0xc0, 0x17f),
                                                  rng.randint(0xac00, 0xd7a3), rng.randint(0x3b1, 0x3c9)]))
                                 for _ in range(rng.randint(1, 8))))
    sep = rng.choice([" ", " ", " ", "  ", "\t", "\n", ""])
    texts.append(sep.join(parts))

cases = []
for t in texts:
    enc = tok.encode(t)
    cases.append({"text": t, "ids": enc.ids, "tokens": enc.tokens})

vocab_sha = hashlib.sha256(open(f"{model_dir}/vocab.txt", "rb").read()).hexdigest()
with open(out, "w", encoding="utf-8") as f:
    json.dump({"generator": f"tokenizers {tokenizers.__version__}", "vocab_sha256": vocab_sha,
               "max_length": max_length, "cases": cases}, f, ensure_ascii=False, indent=0)
print(f"{len(cases)} cases -> {out}")
