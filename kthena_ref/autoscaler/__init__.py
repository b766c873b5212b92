"""The reference autoscaler for AutoscalingPolicy: a pure decision per scalable unit (:mod:`.decision`)."""
