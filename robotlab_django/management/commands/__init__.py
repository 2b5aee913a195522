"""robotlab_install, startrobot, startrobotjob and robotlab_prune."""
