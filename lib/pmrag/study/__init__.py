"""A study: params, the run folder, the store and the declared stage graph (:class:`Study` is the facade)."""

from pmrag.study.facade import Study

__all__ = ["Study"]
