"""Secret randomness (issue 14, section 1): fresh OS entropy by default, seeded runs warn, --secure.

An adversary who knows the public code replays training on each candidate dataset: the guarantee
needs noise and batches that nobody can replay.  These tests check that a default run cannot be
replayed with any seed (the old default 0, or any number printed by the run), that its secret
never reaches a published output (JSON, text, stderr, ledger) and stays in the owner-only
checkpoint, that seeded runs reproduce and warn, and that the secure sampler is N(0, sigma^2).
"""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest
import torch
from scipy import stats

from lastiterate.cli import main
from lastiterate.errors import ParameterError
from lastiterate.train.data import load_dataset
from lastiterate.train.ledger import load_checkpoint
from lastiterate.train.models import GLM, parameters_digest
from lastiterate.train.randomness import (
    SECURE_GAUSSIAN_TERMS,
    SEED_WARNING,
    Randomness,
    SeededRunWarning,
)
from lastiterate.train.sampling import make_sampler
from lastiterate.train.trainer import NoisyCGD, NoisyGD, NoisySGD

# the example
EXAMPLE = [
    "train",
    "--dataset",
    "breast-cancer",
    "--model",
    "logreg",
    "--algorithm",
    "gd",
    "--epochs",
    "20",
    "--lr",
    "0.5",
    "--noise-std",
    "0.05",
    "--clip",
    "1",
    "--feature-norm",
    "1",
    "--l2",
    "0.01",
]
ODD_SEED = 918273645


def _cli(args, capsys):
    capsys.readouterr()
    assert main(args) == 0
    cap = capsys.readouterr()
    return cap.out, cap.err


@pytest.fixture(scope="module")
def breast_cancer():
    """The data exactly as ``lastiterate train`` prepares them by default (public preprocessing)."""
    from lastiterate.train.preprocessing import preprocess

    raw = load_dataset("breast-cancer", seed=0, test_size=0.2, standardize=False)
    return preprocess(raw, scaling="auto", feature_norm=1.0)[0]


def _replay(data, seed):
    """The issue's example trained with ``seed`` through the Python API (what an
    adversary replays)."""
    model = GLM(data.n_features, 1, "binary-logistic", dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededRunWarning)
        NoisyGD(model, lr=0.5, noise_std=0.05, clip=1.0, l2=0.01, feature_norm=1.0, seed=seed).fit(
            data.X_train, data.y_train, epochs=20, account=False
        )
    return parameters_digest(model)


def _numbers_in(text):
    """Every integer an adversary could read in ``text`` as a candidate seed
    (decimal and hex runs)."""
    found = {int(s) for s in re.findall(r"\d+", text)}
    found |= {int(s, 16) for s in re.findall(r"[0-9a-f]{8,}", text)}
    return found


def test_default_runs_differ_and_no_seed_replays_them(tmp_path, capsys, breast_cancer):
    outs, texts = [], []
    for k in range(2):
        ledger = tmp_path / f"l{k}.jsonl"
        out, err = _cli([*EXAMPLE, "--json", "--ledger", str(ledger)], capsys)
        assert err == ""  # no seed, no warning
        js = json.loads(out)
        assert js["randomness"]["seeded"] is False and js["randomness"]["source"] == "os-entropy"
        assert js["randomness"]["warning"] is None
        outs.append(js)
        texts.append(out + ledger.read_text())
    assert outs[0]["parameters_sha256"] != outs[1]["parameters_sha256"]
    # the replay is faithful: it reproduces a seeded CLI run bit for bit
    seeded, _ = _cli([*EXAMPLE, "--json", "--seed", "7"], capsys)
    assert _replay(breast_cancer, 7) == json.loads(seeded)["parameters_sha256"]
    # ... but no seed reproduces a default run: neither the old default 0 nor any number it printed
    candidates = {0, 1, 42} | _numbers_in(texts[0]) | _numbers_in(texts[1])
    assert len(candidates) > 50
    released = {o["parameters_sha256"] for o in outs}
    for seed in sorted(candidates):
        assert _replay(breast_cancer, seed) not in released, seed


def test_seeded_cli_run_reproduces_warns_once_and_never_prints_its_seed(tmp_path, capsys):
    shas = []
    for k in range(2):
        ledger, ck = tmp_path / f"l{k}.jsonl", tmp_path / f"c{k}.pt"
        out, err = _cli(
            [
                *EXAMPLE,
                "--json",
                "--seed",
                str(ODD_SEED),
                "--ledger",
                str(ledger),
                "--checkpoint",
                str(ck),
            ],
            capsys,
        )
        assert err.count("\n") == 1 and err.startswith("warning: ") and SEED_WARNING in err
        js = json.loads(out)
        assert js["randomness"]["seeded"] is True and js["randomness"]["warning"] == SEED_WARNING
        for published in (out, err, ledger.read_text()):
            assert str(ODD_SEED) not in published and f"{ODD_SEED:x}" not in published
        assert (
            load_checkpoint(ck)["rng"]["seed"] == ODD_SEED
        )  # the owner-only checkpoint keeps it (resume)
        shas.append(js["parameters_sha256"])
    assert shas[0] == shas[1]
    text, err = _cli([*EXAMPLE, "--seed", str(ODD_SEED)], capsys)
    assert "SEEDED" in text and str(ODD_SEED) not in text and err.count("\n") == 1
    # the split seed is separate from the noise seed
    other_split, _ = _cli(
        [*EXAMPLE, "--json", "--seed", str(ODD_SEED), "--split-seed", "1"], capsys
    )
    assert json.loads(other_split)["parameters_sha256"] != shas[0]


def test_default_run_keeps_its_secret_in_the_checkpoint_only(tmp_path, capsys):
    ledger, ck = tmp_path / "l.jsonl", tmp_path / "c.pt"
    out, err = _cli([*EXAMPLE, "--json", "--ledger", str(ledger), "--checkpoint", str(ck)], capsys)
    text, _ = _cli(
        [*EXAMPLE, "--ledger", str(ledger), "--checkpoint", str(ck)], capsys
    )  # overwrites ck
    rng = load_checkpoint(ck)["rng"]
    assert rng["seed"] is None and len(bytes.fromhex(rng["root_hex"])) == 16
    root = bytes.fromhex(rng["root_hex"])
    secrets_ = {rng["root_hex"], str(int(rng["root_hex"], 16)), str(int.from_bytes(root, "little"))}
    secrets_ |= {str(int(w)) for w in np.frombuffer(root, dtype="<u4")}
    published = out + err + text + ledger.read_text()
    for s in secrets_:
        assert s not in published
    assert (
        repr(Randomness.from_checkpoint_state(rng))
        == "Randomness(source='os-entropy', secure=False)"
    )


def _toy(n=40, d=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    return X, (X[:, 0] > 0).long()


def test_python_default_is_fresh_per_run_and_silent():
    X, y = _toy()
    digests = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", SeededRunWarning)
        for _ in range(2):
            m = GLM(3, 1, "binary-logistic")
            res = NoisySGD(
                m, batch_size=8, sampling="poisson", lr=0.5, noise_std=0.1, clip=1.0
            ).fit(X, y, epochs=2, account=False)
            assert res.randomness["seeded"] is False and res.randomness["warning"] is None
            digests.append(parameters_digest(m))
        # one method object fitted twice: fresh randomness for the second run too
        m = GLM(3, 1, "binary-logistic")
        meth = NoisyGD(m, lr=0.5, noise_std=0.1, clip=1.0)
        meth.fit(X, y, steps=3, account=False)
        first = parameters_digest(m)
        m.weight.data.zero_()
        meth.fit(X, y, steps=3, account=False)
        assert parameters_digest(m) != first
    assert digests[0] != digests[1]
    s1, s2 = make_sampler("sgd", 50, 5, "shuffle"), make_sampler("sgd", 50, 5, "shuffle")
    assert not all(np.array_equal(s1.batch(t), s2.batch(t)) for t in range(10))


def test_python_seeded_run_reproduces_and_warns():
    X, y = _toy()

    def run(seed, **kw):
        m = GLM(3, 1, "binary-logistic")
        with pytest.warns(SeededRunWarning, match="never reused"):
            res = NoisyCGD(m, batch_size=8, lr=0.5, noise_std=0.1, clip=1.0, seed=seed, **kw).fit(
                X, y, epochs=2, account=False
            )
        assert res.randomness["seeded"] is True and res.randomness["warning"] == SEED_WARNING
        return parameters_digest(m)

    assert run(5) == run(5) != run(6)
    assert run(5, secure=True) == run(5, secure=True) != run(5)


@pytest.mark.parametrize("secure", [False, True])
def test_resume_of_a_default_run_uses_the_checkpoint_secret(tmp_path, secure):
    """Crash after 2 epochs; resuming twice from the same checkpoint gives the same model (the
    checkpoint's secret, not fresh entropy), and a new default run gives another model."""
    import shutil

    X, y = _toy(n=48)
    kw = {
        "batch_size": 12,
        "sampling": "shuffle",
        "lr": 0.5,
        "noise_std": 0.1,
        "clip": 1.0,
        "secure": secure,
    }

    class Crash(Exception):
        pass

    def crash(t, stop):
        if t >= 8:
            raise Crash

    ck = tmp_path / "c.pt"
    with pytest.raises(Crash):
        NoisySGD(GLM(3, 1, "binary-logistic"), **kw).fit(
            X, y, epochs=5, checkpoint=ck, on_epoch=crash, account=False
        )
    saved = tmp_path / "saved.pt"
    shutil.copy(ck, saved)
    digests = []
    for _ in range(2):
        shutil.copy(saved, ck)
        m = GLM(3, 1, "binary-logistic")
        res = NoisySGD(m, **kw).fit(X, y, epochs=5, checkpoint=ck, resume=True, account=False)
        assert res.resumed_from == 8 and res.randomness["secure"] is secure
        digests.append(parameters_digest(m))
    m = GLM(3, 1, "binary-logistic")
    NoisySGD(m, **kw).fit(X, y, epochs=5, account=False)
    assert digests[0] == digests[1] != parameters_digest(m)


def test_secure_gaussian_is_the_claimed_normal():
    """Holohan-Braghin sum of 4 Box-Muller samples / 2 from the keyed CSPRNG: N(0, sigma^2)."""
    r = Randomness.from_seed(11, secure=True)
    z = r.secure_gaussian(3, (0,), 200_000, 0.7)
    assert stats.kstest(z / 0.7, "norm").pvalue > 1e-4
    # variance: (k-1) s^2 / sigma^2 ~ chi^2 (a factor sqrt(2) or 1/2 error would be far outside)
    q = (len(z) - 1) * z.var(ddof=1) / 0.49
    assert stats.chi2.ppf(1e-5, len(z) - 1) < q < stats.chi2.isf(1e-5, len(z) - 1)
    assert SECURE_GAUSSIAN_TERMS == 4  # 2n with n = 2, as Opacus' secure_mode
    # different steps, streams and keys give different draws; the same ones reproduce
    z10 = r.secure_gaussian(3, (0,), 10, 0.7)
    assert np.array_equal(
        z10, Randomness.from_seed(11, secure=True).secure_gaussian(3, (0,), 10, 0.7)
    )
    assert not np.array_equal(z10, r.secure_gaussian(3, (1,), 10, 0.7))
    assert not np.array_equal(z10, r.secure_gaussian(4, (0,), 10, 0.7))
    assert not np.array_equal(
        z10, Randomness.from_seed(12, secure=True).secure_gaussian(3, (0,), 10, 0.7)
    )
    a, b = Randomness.fresh(secure=True), Randomness.fresh(secure=True)
    assert not np.array_equal(
        a.secure_gaussian(3, (0,), 10, 1.0), b.secure_gaussian(3, (0,), 10, 1.0)
    )


def test_secure_batches_have_the_sampler_semantics():
    n, b, T = 40, 8, 4000
    s = make_sampler("sgd", n, b, "poisson", seed=Randomness.from_seed(2, secure=True))
    sizes = np.array([len(s.batch(t)) for t in range(T)])
    assert abs(sizes.mean() - b) < 5 * np.sqrt(b * (1 - b / n) / T)  # Binomial(n, b/n)
    u = make_sampler("sgd", n, b, "uniform", seed=Randomness.from_seed(2, secure=True))
    counts = np.zeros(n)
    for t in range(T):
        idx = u.batch(t)
        assert len(idx) == b == len(set(idx.tolist())) and np.all(np.diff(idx) > 0)
        counts[idx] += 1
    assert stats.chisquare(counts).pvalue > 1e-4  # every example equally likely
    sh = make_sampler("sgd", n, b, "shuffle", seed=Randomness.from_seed(2, secure=True))
    epoch = np.sort(np.concatenate([sh.batch(t) for t in range(5)]))
    assert epoch.tolist() == list(range(n))
    c = make_sampler("cgd", n, b, seed=Randomness.from_seed(2, secure=True))
    assert sorted(np.concatenate(c.partition).tolist()) == list(range(n))


def test_secure_cli_flag(capsys):
    out, err = _cli([*EXAMPLE, "--json", "--secure"], capsys)
    js = json.loads(out)
    assert js["randomness"]["secure"] is True and js["randomness"]["seeded"] is False and err == ""
    assert "SHAKE-256" in js["randomness"]["generator"]


def test_randomness_state_and_bad_input():
    r = Randomness.fresh()
    st = json.loads(json.dumps(r.checkpoint_state()))  # plain JSON data
    back = Randomness.from_checkpoint_state(st)
    assert np.array_equal(back.generator(1, 2).random(4), r.generator(1, 2).random(4))
    assert st["root_hex"] not in repr(r) + json.dumps(r.describe()) + json.dumps(r.fingerprint())
    for bad in (
        None,
        {},
        {**st, "root_hex": "zz"},
        {**st, "root_hex": "00"},
        {**st, "secure": "no"},
    ):
        with pytest.raises(ParameterError):
            Randomness.from_checkpoint_state(bad)
    for seed in (-1, 1.5, True, "3"):
        with pytest.raises(ParameterError, match="seed"):
            NoisyGD(GLM(3, 1, "binary-logistic"), lr=0.5, noise_std=0.1, clip=1.0, seed=seed)
    with pytest.raises(ParameterError, match="secure"):
        NoisyGD(GLM(3, 1, "binary-logistic"), lr=0.5, noise_std=0.1, clip=1.0, secure="yes")


@pytest.mark.parametrize(
    ("flag", "value"), [("--seed", "-1"), ("--split-seed", "-1"), ("--split-seed", str(2**32))]
)
def test_cli_bad_seed_is_one_line(capsys, flag, value):
    capsys.readouterr()
    assert main([*EXAMPLE, flag, value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and flag.lstrip("-").replace("-", "_") in err


def test_seeded_default_mode_draws_the_documented_stream():
    """seed s: the noise of step t is torch.randn from SeedSequence([s, stream, t])
    (the earlier scheme)."""
    r = Randomness.from_seed(4)
    g = torch.Generator()
    g.manual_seed(int(np.random.SeedSequence([4, 21, 9]).generate_state(1, dtype=np.uint64)[0]))
    assert torch.equal(
        r.gaussian(21, 9, 5, 0.3, torch.float64),
        torch.randn(5, generator=g, dtype=torch.float64) * 0.3,
    )
    assert np.array_equal(
        make_sampler("sgd", 30, 5, "uniform", seed=4).batch(3),
        np.sort(
            np.random.default_rng(np.random.SeedSequence([4, 13, 3])).choice(30, 5, replace=False)
        ),
    )
