"""A job split in parts that run at once on many workers, behind one bar:
the parts (counted down to the merge by webfarm.progress.countdown) run on the workers
(running), each publishing into its entry of the record (reporter), the
entries combined into one bar (combined), and the reaper's part (reaper).
"""
