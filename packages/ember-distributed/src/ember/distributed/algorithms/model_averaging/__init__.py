"""Model averaging (post-local SGD): ``averagers`` (PeriodicModelAverager), ``hierarchical_model_averager``
(HierarchicalModelAverager) and ``utils`` (average_parameters and the helpers they use)."""
