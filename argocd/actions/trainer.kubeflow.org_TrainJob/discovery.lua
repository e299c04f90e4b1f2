-- Suspend and resume a TrainJob through spec.suspend, which Kubeflow Trainer v2.3.0 honours
-- (pkg/apis/trainer/v1alpha1/trainjob_types.go TrainJobSpec.Suspend; pkg/controller/trainjob_controller.go
-- setSuspendedCondition). Offered as Argo CD's built-in batch/Job actions are (resource_customizations/batch/Job/actions
-- at v3.5.1): not once the run has finished (Complete or Failed).
local actions = {}
local finished = false
if obj.status ~= nil and obj.status.conditions ~= nil then
  for _, c in ipairs(obj.status.conditions) do
    if (c.type == "Complete" or c.type == "Failed") and c.status == "True" then
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
