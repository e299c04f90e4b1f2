-- Suspend and resume a PyTorchJob through spec.runPolicy.suspend, which the training operator (kubeflow/trainer
-- v1.9.4) honours (pkg/apis/kubeflow.org/v1/common_types.go RunPolicy.Suspend; pkg/controller.v1/common/job.go
-- ReconcileJobs: the pods are deleted, the Suspended condition set). Offered as Argo CD's built-in batch/Job actions are
-- (resource_customizations/batch/Job/actions at v3.5.1): not once the job has finished (Succeeded or Failed).
local actions = {}
local finished = false
if obj.status ~= nil and obj.status.conditions ~= nil then
  for _, c in ipairs(obj.status.conditions) do
    if (c.type == "Succeeded" or c.type == "Failed") and c.status == "True" then
      finished = true
    end
  end
end
if finished then
  return actions
end
if obj.spec ~= nil and obj.spec.runPolicy ~= nil and obj.spec.runPolicy.suspend == true then
  actions["resume"] = {["iconClass"] = "fa fa-fw fa-play"}
else
  actions["suspend"] = {["iconClass"] = "fa fa-fw fa-pause"}
end
return actions
