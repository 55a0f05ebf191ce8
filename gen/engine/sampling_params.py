"""Kept for imports of the old path; SamplingParams lives in the torch-free gen.sampling."""

from gen.sampling import SamplingParams

__all__ = ["SamplingParams"]
