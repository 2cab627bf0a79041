"""Privacy notions and their calculus.

* :mod:`~lastiterate.notions.gdp`: Gaussian DP (tradeoff G_mu, exact delta(eps) and
  eps(delta), GDP -> RDP);
* :mod:`~lastiterate.notions.tradeoff`: tradeoff curves (f-DP), privacy profiles, symmetrisation,
  combination of guarantees, the subsampling operator C_p;
* :mod:`~lastiterate.notions.rdp`: Renyi DP curves, the sampled Gaussian in both directions,
  RDP -> (eps, delta);
* :mod:`~lastiterate.notions.pld`: numerical composition of privacy-loss distributions
  with rigorous error;
* :mod:`~lastiterate.notions.clt`: central-limit approximations (estimates, never bounds).
* :mod:`~lastiterate.notions.roots`: bracketed root finding (Brent's method) for the inverses
  above, returning the final bracket so that callers round in the safe direction.

Submodules are imported on demand (``from lastiterate.notions.gdp import gdp_epsilon``) to keep the
command-line tool's start-up cheap.
"""
