-- Suspend and resume a JobSet through spec.suspend, which kubernetes-sigs/jobset v0.12.0 honours
-- (api/jobset/v1alpha2/jobset_types.go JobSetSpec.Suspend; pkg/controllers/jobset_controller.go
-- setJobSetSuspendedCondition, resumeJobsIfNecessary). Offered as Argo CD's built-in batch/Job actions are
-- (resource_customizations/batch/Job/actions at v3.5.1): not once the JobSet has finished (Completed or Failed), and
-- not on a JobSet another object controls: Kubeflow Trainer v2.3.0 applies its TrainJob's spec.suspend to the JobSet
-- it owns whenever either is suspended (pkg/runtime/framework/plugins/jobset/jobset.go Build), so suspend the TrainJob.
local actions = {}
for _, ref in ipairs(obj.metadata.ownerReferences or {}) do
  if ref.controller == true then
    return actions
  end
end
local finished = false
if obj.status ~= nil and obj.status.conditions ~= nil then
  for _, c in ipairs(obj.status.conditions) do
    if (c.type == "Completed" or c.type == "Failed") and c.status == "True" then
      finished = true
    end
  end
end
if finished then
  return actions
end
if obj.spec ~= nil and obj.spec.suspend == true then
  actions["resume"] = {["iconClass"] = "fa fa-fw fa-play"}
else
  actions["suspend"] = {["iconClass"] = "fa fa-fw fa-pause"}
end
return actions
