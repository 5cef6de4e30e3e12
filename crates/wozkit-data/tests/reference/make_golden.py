"""Reference values for wozkit-data's statistics (tests/suite/stats_golden.rs).

Run from this folder with `python3 make_golden.py` (needs numpy, scipy, statsmodels, krippendorff
and choix: `pip install numpy scipy statsmodels krippendorff choix`). It writes golden.json. Every
reference value comes from a published implementation; only Elo, which none of them has, is a
transcription of the CRSArena analysis notebook (k = 16, start = 1000, ties 0.5, vote order).
"""

import csv
import json
import math
import os

import choix
import krippendorff
import numpy as np
from scipy import optimize, stats
from statsmodels.stats.inter_rater import fleiss_kappa

HERE = os.path.dirname(os.path.abspath(__file__))
CORPORA = os.path.join(HERE, "../../../../../shared/corpora")
rng = np.random.default_rng(20240913)


def likert(n, low=1, high=5, p=None):
    return [float(v) for v in rng.choice(np.arange(low, high + 1), size=n, p=p)]


def floats(n, loc=0.0, scale=1.0):
    return [float(v) for v in rng.normal(loc, scale, size=n)]


samples = [
    likert(12),
    likert(31, p=[0.05, 0.1, 0.2, 0.4, 0.25]),
    floats(17, 3.5, 1.2),
    [2.0, 2.0, 3.0, 3.0, 1.0],
    [7.25],
]

descriptive = []
for data in samples:
    descriptive.append({
        "data": data,
        "mean": float(np.mean(data)),
        "sd": float(np.std(data, ddof=1)) if len(data) > 1 else None,
        "median": float(np.median(data)),
        "mode": float(stats.mode(data, keepdims=False).mode),
    })

mann_whitney = []
pairs = [
    (likert(20, p=[0.1, 0.1, 0.2, 0.3, 0.3]), likert(25, p=[0.3, 0.3, 0.2, 0.1, 0.1])),
    (likert(8), likert(9)),
    (floats(15, 0.3), floats(12)),
    ([1.0, 2.0, 2.0, 3.0], [2.0, 3.0, 3.0, 4.0, 5.0]),
]
for x, y in pairs:
    for alternative in ["greater", "less", "two-sided"]:
        res = stats.mannwhitneyu(x, y, alternative=alternative, method="asymptotic",
                                 use_continuity=True)
        mann_whitney.append({"x": x, "y": y, "alternative": alternative,
                             "u": float(res.statistic), "p": float(res.pvalue)})

correlations = []
base = floats(30)
corr_pairs = [
    (base, [b * 0.6 + e for b, e in zip(base, floats(30, scale=0.8))]),
    (likert(25), likert(25)),
    (floats(10), [-v for v in floats(10)]),
    ([1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 4.0]),
    ([1.0, 2.0, 2.0, 3.0, 5.0], [2.0, 2.0, 1.0, 4.0, 4.0]),
]
for x, y in corr_pairs:
    p = stats.pearsonr(x, y)
    s = stats.spearmanr(x, y)
    correlations.append({"x": x, "y": y,
                         "pearson_r": float(p.statistic), "pearson_p": float(p.pvalue),
                         "spearman_rho": float(s.statistic), "spearman_p": float(s.pvalue)})

binomial = []
for k, n, p0 in [(7, 20, 0.5), (0, 10, 0.5), (15, 20, 0.3), (3, 3, 0.5), (50, 100, 0.5),
                 (61, 100, 0.5), (2, 40, 0.1), (33, 50, 0.75), (184, 300, 0.5)]:
    binomial.append({"k": k, "n": n, "p0": p0,
                     "p": float(stats.binomtest(k, n, p0, alternative="two-sided").pvalue)})


def elo(outcomes, k=16.0, start=1000.0):
    ratings = {}
    for first, second, score in outcomes:
        ra, rb = ratings.setdefault(first, start), ratings.setdefault(second, start)
        expected = 1.0 / (1.0 + 10 ** ((rb - ra) / 400.0))
        ratings[first] = ra + k * (score - expected)
        ratings[second] = rb + k * ((1.0 - score) - (1.0 - expected))
    return ratings


def csv_outcomes(name):
    with open(os.path.join(CORPORA, "crsarena_dial", name), newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return [(r["crs1"], r["crs2"],
             1.0 if r["vote"] == r["crs1"] else 0.0 if r["vote"] == r["crs2"] else 0.5)
            for r in rows]


systems = ["a", "b", "c", "d"]
synthetic = []
for _ in range(60):
    i, j = rng.choice(4, size=2, replace=False)
    synthetic.append((systems[i], systems[j], float(rng.choice([1.0, 0.0, 0.5], p=[0.5, 0.3, 0.2]))))
elo_cases = [
    {"name": "synthetic", "outcomes": synthetic, "k": 32.0, "start": 1500.0,
     "ratings": elo(synthetic, 32.0, 1500.0)},
    {"name": "votes_closed.csv", "k": 16.0, "start": 1000.0,
     "ratings": elo(csv_outcomes("votes_closed.csv"))},
    {"name": "votes_open.csv", "k": 16.0, "start": 1000.0,
     "ratings": elo(csv_outcomes("votes_open.csv"))},
]


def bt_by_likelihood(outcomes):
    """Maximum likelihood with ties as half wins, by a generic optimiser."""
    names = list(dict.fromkeys([o[0] for o in outcomes] + [o[1] for o in outcomes]))
    index = {n: i for i, n in enumerate(names)}

    def nll(theta):
        total = 0.0
        for first, second, score in outcomes:
            a, b = theta[index[first]], theta[index[second]]
            log_p = -np.logaddexp(0.0, b - a)
            log_q = -np.logaddexp(0.0, a - b)
            total -= score * log_p + (1.0 - score) * log_q
        return total + 1e-9 * np.sum(theta) ** 2

    res = optimize.minimize(nll, np.zeros(len(names)), method="BFGS", options={"gtol": 1e-10})
    strength = np.exp(res.x)
    strength /= strength.sum()
    return dict(zip(names, map(float, strength)))


no_ties = [(a, b, s) for a, b, s in synthetic if s != 0.5]
data = [(systems.index(a), systems.index(b)) if s == 1.0 else (systems.index(b), systems.index(a))
        for a, b, s in no_ties]
params = np.exp(choix.mm_pairwise(4, data, alpha=0.0, max_iter=100000, tol=1e-12))
bt_cases = [
    {"name": "with ties (scipy BFGS)", "outcomes": synthetic, "strength": bt_by_likelihood(synthetic)},
    {"name": "no ties (choix MM)", "outcomes": no_ties,
     "strength": dict(zip(systems, map(float, params / params.sum())))},
]

agreement = []
for level, make in [("nominal", lambda: rng.choice([0.0, 1.0, 2.0], size=(4, 25), p=[0.5, 0.3, 0.2])),
                    ("interval", lambda: rng.choice(np.arange(1.0, 6.0), size=(3, 30)))]:
    for _ in range(2):
        data = make()
        truth = data[0]
        # Annotators mostly agree with the first one, and some ratings are missing.
        for row in data[1:]:
            agree = rng.random(row.shape) < 0.7
            row[agree] = truth[agree]
        data[rng.random(data.shape) < 0.15] = np.nan
        alpha = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
        agreement.append({"level": level,
                          "reliability_data": [[None if math.isnan(v) else float(v) for v in row]
                                               for row in data],
                          "alpha": float(alpha)})

fleiss = []
for raters, categories, units in [(3, 3, 20), (5, 4, 12), (2, 2, 30)]:
    table = []
    for _ in range(units):
        favourite = rng.integers(categories)
        p = np.full(categories, 0.3 / (categories - 1))
        p[favourite] = 0.7
        table.append(np.bincount(rng.choice(categories, size=raters, p=p), minlength=categories))
    table = np.array(table)
    fleiss.append({"table": table.tolist(), "kappa": float(fleiss_kappa(table, method="fleiss"))})


# Student-t 95% confidence intervals of a mean (scipy.stats.t.interval around the sample mean).
t_intervals = []
for data in [samples[0], samples[1], samples[2], [2.0, 2.0, 3.0, 3.0, 1.0], [4.0, 5.0],
             [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]]:
    sem = stats.sem(data)
    low, high = stats.t.interval(0.95, len(data) - 1, loc=np.mean(data), scale=sem)
    t_intervals.append({"data": data, "level": 0.95, "low": float(low), "high": float(high)})

# A small evaluation study, written as participant logs by tests/suite/judgments.rs: ratings of single
# dialogues (two questions, 1-5) and ACUTE-Eval comparisons. Hand-written so that every worker
# judges a different subset and some items miss a worker.
judgment_ratings = [
    # worker, item, dialogue, system, fluency, engaging
    ("w1", "r1", "d1", "bot_a", 4, 3), ("w2", "r1", "d1", "bot_a", 5, 3),
    ("w3", "r1", "d1", "bot_a", 4, 2), ("w1", "r2", "d2", "bot_b", 2, 2),
    ("w2", "r2", "d2", "bot_b", 3, 1), ("w1", "r3", "d3", "bot_a", 5, 4),
    ("w3", "r3", "d3", "bot_a", 4, 4), ("w2", "r4", "d4", "bot_b", 2, 3),
    ("w3", "r4", "d4", "bot_b", 1, 2), ("w3", "r2", "d2", "bot_b", 2, 1),
    ("w4", "r1", "d1", "bot_a", 3, 3), ("w4", "r2", "d2", "bot_b", 3, 3),
    ("w4", "r4", "d4", "bot_b", 3, 3),
]
dialogue_system = {"d1": "bot_a", "d2": "bot_b", "d3": "bot_a", "d4": "bot_b",
                   "d5": "human", "d6": "human"}
judgment_comparisons = [
    # worker, item, left dialogue, right dialogue, chosen dialogue
    ("w1", "c1", "d1", "d5", "d5"), ("w2", "c1", "d5", "d1", "d5"),
    ("w3", "c1", "d1", "d5", "d1"), ("w1", "c2", "d2", "d6", "d6"),
    ("w2", "c2", "d2", "d6", "d6"), ("w3", "c3", "d3", "d4", "d3"),
    ("w1", "c3", "d4", "d3", "d3"), ("w2", "c3", "d3", "d4", "d4"),
    ("w4", "c2", "d6", "d2", "d6"),
]
questions = ["engaging", "fluency"]
rating_stats = {}
for system in sorted({r[3] for r in judgment_ratings}):
    for qi, question in enumerate(["fluency", "engaging"]):
        values = [float(r[4 + qi]) for r in judgment_ratings if r[3] == system]
        sem = stats.sem(values)
        low, high = stats.t.interval(0.95, len(values) - 1, loc=np.mean(values), scale=sem)
        rating_stats.setdefault(system, {})[question] = {
            "n": len(values), "mean": float(np.mean(values)),
            "sd": float(np.std(values, ddof=1)), "ci_low": float(low), "ci_high": float(high)}

grid = {}
for worker, item, left, right, chosen in judgment_comparisons:
    a, b = sorted([dialogue_system[left], dialogue_system[right]])
    wins = grid.setdefault(f"{a}|{b}", {"a": a, "b": b, "a_wins": 0, "b_wins": 0})
    wins["a_wins" if dialogue_system[chosen] == a else "b_wins"] += 1
for pair in grid.values():
    n = pair["a_wins"] + pair["b_wins"]
    pair["a_win_rate"] = pair["a_wins"] / n
    pair["p"] = float(stats.binomtest(pair["a_wins"], n, 0.5, alternative="two-sided").pvalue)

workers = sorted({r[0] for r in judgment_ratings} | {c[0] for c in judgment_comparisons})
rating_items = sorted({r[1] for r in judgment_ratings})
rating_alpha = {}
for qi, question in enumerate(["fluency", "engaging"]):
    table = np.full((len(workers), len(rating_items)), np.nan)
    for r in judgment_ratings:
        table[workers.index(r[0]), rating_items.index(r[1])] = r[4 + qi]
    rating_alpha[question] = float(krippendorff.alpha(reliability_data=table,
                                                      level_of_measurement="interval"))
systems_sorted = sorted(set(dialogue_system.values()))
comparison_items = sorted({c[1] for c in judgment_comparisons})
table = np.full((len(workers), len(comparison_items)), np.nan)
for worker, item, left, right, chosen in judgment_comparisons:
    table[workers.index(worker), comparison_items.index(item)] = \
        systems_sorted.index(dialogue_system[chosen])
comparison_alpha = float(krippendorff.alpha(reliability_data=table,
                                            level_of_measurement="nominal"))
judgments = {
    "dialogue_system": dialogue_system,
    "ratings": [list(r) for r in judgment_ratings],
    "comparisons": [list(c) for c in judgment_comparisons],
    "rating_stats": rating_stats,
    "win_rates": sorted(grid.values(), key=lambda p: (p["a"], p["b"])),
    "rating_alpha": rating_alpha,
    "comparison_alpha": comparison_alpha,
}

golden = {
    "descriptive": descriptive,
    "mann_whitney": mann_whitney,
    "correlations": correlations,
    "binomial": binomial,
    "elo": elo_cases,
    "bradley_terry": bt_cases,
    "krippendorff": agreement,
    "fleiss": fleiss,
    "t_intervals": t_intervals,
    "judgments": judgments,
}
with open(os.path.join(HERE, "golden.json"), "w", encoding="utf-8") as f:
    json.dump(golden, f, indent=1)
    f.write("\n")
